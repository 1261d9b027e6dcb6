package auth

import (
	"context"
	"database/sql"
	"slices"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// The principals of user, team, organization and audit trail tokens are
// kept between requests, each with the authentication epoch it was read
// under: a counter in the store (table auth_epoch, migration 1040) that
// the store's own triggers raise in every transaction that
// writes anything such a principal is made of (the token's kind, subject,
// hash or expiry, its deletion, users, teams, team and organization
// memberships, organizations, token TTL policies). A request with a token
// this replica has authenticated before reads the counter (one single-row
// statement) and uses the kept principal only when it was read under the
// same value; otherwise it authenticates with the one query and keeps the
// result under the value it read first.
//
// Why that cannot serve a revoked principal: the counter is raised inside
// the revoking transaction, so a request that reads the raised value runs
// after that transaction committed and reads the revocation too; a request
// that read the old value before the commit keeps its result under the old
// value, which no request after the commit reads (the counter only grows,
// and to the clock when that is ahead: a database restored from a backup
// cannot bring back a value read before). On every replica alike, since
// the counter is in the shared store. Only a token's last use is
// written without raising it, and that is not part of a principal (the
// entry keeps it to record the use at most once a minute, as before). What
// depends on time, a token's expiry and its organization's TTL policy, is
// checked on every request.
//
// What it saves: the one query (the token, its user, every membership and
// team, the organizations' settings; for a team or organization token the
// TTL policy's statement too) becomes a primary-key read of one row on the
// hot path. Run, agent and task result tokens still take the query: their
// principals depend on rows, such as a run's status, that change all the
// time, and tokens of those kinds are made and deleted with every run,
// which must not move the epoch.

// KeptKinds are the kinds of token whose principals are kept: the kinds
// for which the store's triggers raise the epoch when a token is deleted
// or changed (migration 1040 names them too; a test holds the two
// together).
var KeptKinds = []Kind{KindUser, KindTeam, KindOrganization, KindAuditTrails}

// epochQuery reads the authentication epoch.
const epochQuery = `SELECT n FROM auth_epoch WHERE id = 1`

// kept is what a request needs of a token's principal besides the store.
type kept struct {
	principal Principal
	// teams are a user's teams, for the request memo (MemberTeamsSQL).
	teams []MemberTeam
	// used is the token's last use as recorded.
	used, exp sql.NullInt64
	// created and ttl: a team or organization token's creation and its
	// organization's TTL policy, when one applies.
	created    int64
	ttl        time.Duration
	ttlApplies bool
}

// keptPrincipal is a token's principal as the one query read it, under an
// epoch; epoch -1 marks a token of a kind that is kept, seen before any
// epoch was read for it.
type keptPrincipal struct {
	epoch int64
	kept
	// lastUse is when the token's use was last recorded (micros; 0:
	// never).
	lastUse atomic.Int64
}

// newKeptPrincipals bounds the principals kept, by token hash.
func newKeptPrincipals() *core.Bounded[string, *keptPrincipal] {
	return &core.Bounded[string, *keptPrincipal]{Max: 4096}
}

// readEpoch reads the authentication epoch; ok is false when it cannot be
// read (the request then authenticates with the one query, keeping
// nothing).
func (s *Service) readEpoch(ctx context.Context) (epoch int64, ok bool) {
	if err := s.db.QueryRow(context.WithoutCancel(ctx), epochQuery).Scan(&epoch); err != nil {
		return 0, false
	}
	return epoch, true
}

// keep remembers a token's principal read under at; without an epoch, it
// remembers that the token is of a kind whose principal is kept, so that
// its next request reads the epoch.
func (s *Service) keep(hash string, at keepAt, k kept) {
	if !slices.Contains(KeptKinds, k.principal.Kind) {
		return
	}
	e := &keptPrincipal{epoch: -1}
	if at.ok {
		// Its own slices: the request goes on with the principal kept
		// from (fromKept hands out copies too).
		p := &k.principal
		p.Orgs, p.Owns, p.UserTokensBlocked, p.Disabled = slices.Clone(p.Orgs), slices.Clone(p.Owns), slices.Clone(p.UserTokensBlocked), slices.Clone(p.Disabled)
		k.teams = slices.Clone(k.teams)
		e = &keptPrincipal{epoch: at.epoch, kept: k}
		e.lastUse.Store(k.used.Int64)
	}
	s.kept.Put(hash, e)
}

// recorded is a token's last recorded use once a request at now has
// recorded its own (recordUse).
func recorded(used sql.NullInt64, now time.Time) sql.NullInt64 {
	if useDue(used, now) {
		return sql.NullInt64{Int64: core.Micros(now), Valid: true}
	}
	return used
}

// fromKept answers a request from a kept principal: the same checks and
// effects as the one query's path for what can change without the epoch
// moving (expiry and the TTL policy, which are matters of time, and the
// record of the token's use), then a copy of the principal.
func (s *Service) fromKept(ctx context.Context, k *keptPrincipal) (*Principal, error) {
	now := core.Now()
	if k.exp.Valid && core.FromMicros(k.exp.Int64).Before(now) {
		return nil, core.Unauthorized("token has expired")
	}
	if err := ttlExceeded(&k.principal, k.created, k.ttl, k.ttlApplies, now); err != nil {
		return nil, err
	}
	last := k.lastUse.Load()
	if used := (sql.NullInt64{Int64: last, Valid: last != 0}); useDue(used, now) {
		if err := s.recordUse(ctx, k.principal.TokenID, used, now); err != nil {
			return nil, err
		}
		k.lastUse.CompareAndSwap(last, core.Micros(now))
	}
	p := k.principal
	p.Orgs, p.Owns, p.UserTokensBlocked, p.Disabled = slices.Clone(p.Orgs), slices.Clone(p.Owns), slices.Clone(p.UserTokensBlocked), slices.Clone(p.Disabled)
	if mt, ok := s.memberships.(MemberTeamsSQL); ok && p.Kind == KindUser {
		mt.RememberUserTeams(ctx, p.UserID, p.Orgs, k.teams)
	}
	return &p, nil
}
