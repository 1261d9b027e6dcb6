// Package auth authenticates API callers. It keeps users and tokens (user,
// team, organization, run and agent tokens, stored as SHA-256 hashes),
// turns a bearer token into a Principal, and answers the one question every
// domain service asks: may this caller see this organization?
//
// A token authenticates in one store round trip: one query reads the
// token, its user, the user's organizations (and which through the owners
// team) and the organizations that refuse user tokens, with the SQL for
// memberships and organization settings supplied by the team and
// organization packages (MembershipsSQL, OrganizationsSQL). The principal
// of a user, team, organization or audit trail token is then kept between
// requests under the store's authentication epoch, a counter the store's
// triggers raise in every transaction that changes what such a principal
// is made of (cache.go): a request reads the counter (one single-row
// statement) and authenticates from the kept principal while it has not
// moved, so that a deleted token, a removed membership or a changed
// setting still counts on the very next request on every replica. Run
// tokens are read by the query on every request; the other kinds are read
// by it and then resolved by their own domains.
package auth
