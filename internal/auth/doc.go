// Package auth authenticates API callers. It keeps users and tokens (user,
// team, organization, run and agent tokens, stored as SHA-256 hashes),
// turns a bearer token into a Principal, and answers the one question every
// domain service asks: may this caller see this organization?
//
// A user token authenticates in one store round trip: one query reads the
// token, its user, the user's organizations (and which through the owners
// team) and the organizations that refuse user tokens, with the SQL for
// memberships and organization settings supplied by the team and
// organization packages (MembershipsSQL, OrganizationsSQL). Nothing is
// cached between requests, so a deleted token, a removed membership or a
// changed setting counts on the very next request on every replica. Other
// token kinds are read by the same query and then resolved by their own
// domains.
package auth
