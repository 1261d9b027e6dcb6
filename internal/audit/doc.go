// Package audit keeps Terrace's audit trail: an append-only record of every
// write through the API (and of every read that hands out state or other
// sensitive data), saying who did it (user, team, organization token or
// run), what (resource type, ID and action), when, from where (client
// address and user agent) and under which request ID.
//
// Events are recorded in one place, the Recorder middleware that the
// server puts between authentication and the API routes: it derives the
// resource and action from the route pattern that served the request, so
// domain services record nothing themselves. The web UI's forms, which do
// not pass the Recorder, call RecordPage with the equivalent API route, so
// their events are derived by the same rules (marked source "ui"); the
// sign-in pages record sign-ins, failures and sign-outs with RecordSignin.
// Request and response bodies
// are never stored, so no variable value, token or state can end up in a
// record.
//
// An organization's events are read with GET /api/v2/organization/audit-trail
// (HCP Terraform's shape, not JSON:API) using the organization's token or
// its audit-trails token; site admins read every event, site events
// included, at GET /api/v2/admin/audit-trail. The organization audit
// configuration (GET/PATCH /api/v2/organizations/:org/audit-configuration)
// turns an organization's recording off and on. Events older than the
// retention period are pruned by a background loop (Service.Run).
package audit
