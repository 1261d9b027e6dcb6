package auth

import (
	"context"
	"database/sql"
	"slices"
	"sync/atomic"

	"github.com/terracehq/terrace/internal/core"
)

// The principals of user tokens are kept between requests, each with the
// authentication epoch it was read under: a counter in the store (table
// auth_epoch, migration 1040) that the store's own triggers raise in every
// transaction that writes anything a user token's principal is made of
// (the token's kind, subject, hash or expiry, its deletion, users, teams,
// team and organization memberships, organizations). A request reads the
// counter (one single-row statement) and uses a kept principal only when
// it was read under the same value; otherwise it authenticates with the
// one query and keeps the result under the value it read first.
//
// Why that cannot serve a revoked principal: the counter is raised inside
// the revoking transaction, so a request that reads the raised value runs
// after that transaction committed and reads the revocation too; a request
// that read the old value before the commit keeps its result under the old
// value, which no request after the commit reads. On every replica alike,
// since the counter is in the shared store. Only a token's last use is
// written without raising it, and that is not part of a principal (the
// entry keeps it to record the use at most once a minute, as before).
//
// What it saves: the one query (the token, its user, every membership and
// team, the organizations' settings) becomes a primary-key read of one
// row on the hot path; team, organization and run tokens still take the
// query (their principals depend on rows, such as a run's status, that
// change all the time).

// epochQuery reads the authentication epoch.
const epochQuery = `SELECT n FROM auth_epoch WHERE id = 1`

// keptPrincipal is a user token's principal as the one query read it.
type keptPrincipal struct {
	epoch     int64
	principal Principal
	teams     []MemberTeam
	exp       sql.NullInt64
	// used is the token's last use as last recorded (micros; 0: never).
	used atomic.Int64
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

// keep remembers a user token's principal read under epoch.
func (s *Service) keep(hash string, epoch int64, p *Principal, teams []MemberTeam, used, exp sql.NullInt64) {
	k := &keptPrincipal{epoch: epoch, principal: *p, teams: teams, exp: exp}
	if used.Valid {
		k.used.Store(used.Int64)
	}
	s.kept.Put(hash, k)
}

// fromKept answers a request from a kept principal: the same checks and
// effects as the one query's path for what can change without the epoch
// moving (expiry, which is a matter of time, and the record of the
// token's use), then a copy of the principal.
func (s *Service) fromKept(ctx context.Context, k *keptPrincipal) (*Principal, error) {
	now := core.Now()
	if k.exp.Valid && core.FromMicros(k.exp.Int64).Before(now) {
		return nil, core.Unauthorized("token has expired")
	}
	last := k.used.Load()
	if used := (sql.NullInt64{Int64: last, Valid: last != 0}); useDue(used, now) {
		if err := s.recordUse(ctx, k.principal.TokenID, used, now); err != nil {
			return nil, err
		}
		k.used.CompareAndSwap(last, core.Micros(now))
	}
	p := k.principal
	p.Orgs, p.Owns, p.UserTokensBlocked = slices.Clone(p.Orgs), slices.Clone(p.Owns), slices.Clone(p.UserTokensBlocked)
	if mt, ok := s.memberships.(MemberTeamsSQL); ok {
		mt.RememberUserTeams(ctx, p.UserID, p.Orgs, k.teams)
	}
	return &p, nil
}
