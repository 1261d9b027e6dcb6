// Package signin lets people into the browser side of Terrace (/app): local
// accounts with argon2id password hashes, server-side sessions behind a
// secure HTTP-only cookie, invitation links for organization memberships,
// OpenID Connect single sign-on, settings pages where users mint and
// revoke their own API tokens, change their password and sign out
// everywhere, and the login.v1 OAuth flow that `terraform login` and
// `tofu login` drive. Password attempts are limited with counts in the
// store, shared by every replica. The pages use the web UI's layout and
// form token (package ui), and what people do on them goes into the audit
// trail.
//
// A session resolves to the same *auth.Principal a user token gives
// (Middleware), for /app paths only: /api/v2 stays bearer-token only.
// Nothing secret is stored: sessions, invitations, authorization codes and
// OIDC states are kept as SHA-256 hashes of their random values.
package signin
