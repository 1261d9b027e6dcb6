// Package auth authenticates API callers. It keeps users and tokens (user,
// team, organization, run and agent tokens, stored as SHA-256 hashes),
// turns a bearer token into a Principal, and answers the one question every
// domain service asks: may this caller see this organization?
package auth
