// Package signin lets people into the browser side of Terrace (/app): local
// accounts with argon2id password hashes, server-side sessions behind a
// secure HTTP-only cookie, invitation links for organization memberships,
// OpenID Connect single sign-on, a settings page where users mint and
// revoke their own API tokens, and the login.v1 OAuth flow that
// `terraform login` and `tofu login` drive.
//
// A session resolves to the same *auth.Principal a user token gives
// (Middleware), for /app paths only: /api/v2 stays bearer-token only.
// Nothing secret is stored: sessions, invitations, authorization codes and
// OIDC states are kept as SHA-256 hashes of their random values.
package signin
