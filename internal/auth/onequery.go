package auth

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// MembershipsSQL is implemented by a Memberships provider that can say in
// SQL what UserOrganizations answers: a query with the columns user_id,
// organization_name and owner (1 when through the owners team, else 0).
type MembershipsSQL interface {
	UserOrganizationsSQL() string
}

// MemberTeamsSQL is implemented by a Memberships provider that can also
// name, in the one query, the teams through which a user belongs to each
// organization, so that authorizing the request reads nothing more:
// UserTeamsSQL is UserOrganizationsSQL with the columns team_id,
// team_name, team_attrs and team_created_at added (NULL on a row of a
// membership through no team), and RememberUserTeams receives, for the
// rest of the request (its request memo), every team of the user in each
// of the organizations listed.
type MemberTeamsSQL interface {
	UserTeamsSQL() string
	RememberUserTeams(ctx context.Context, userID string, orgs []string, teams []MemberTeam)
}

// MemberTeam is a team row as the one query reads it.
type MemberTeam struct {
	ID, Organization, Name, Attrs string
	CreatedAt                     int64
}

// OrganizationsSQL is implemented by an Organizations provider that can
// say in SQL what UserTokensDisabled and DisabledOrganizations answer:
// queries with one column, name, listing the organizations that refuse
// user tokens, and those a site admin has disabled.
type OrganizationsSQL interface {
	UserTokensDisabledSQL() string
	DisabledOrganizationsSQL() string
}

// TeamsSQL is implemented by a Memberships provider that can say in SQL
// what TeamOrganization and IsOwnersTeam answer: a query with the columns
// id, organization_name and owners (1 for an owners team, else 0).
type TeamsSQL interface {
	TeamTokensSQL() string
}

// OrganizationIDsSQL is implemented by an Organizations provider that can
// say in SQL what NameByID answers: a query with the columns id and name.
type OrganizationIDsSQL interface {
	OrganizationIDsSQL() string
}

// RunsSQL is implemented by a RunResolver that can say in SQL what
// RunWorkspace answers: a query with the columns id, workspace_id,
// organization_name and final (1 when the run has finished, else 0).
type RunsSQL interface {
	RunTokensSQL() string
}

// authQuery is the one query that authenticates a bearer token: the token
// and, for a user token, its user (and whether it is suspended), each
// organization the user belongs to, whether through the owners team,
// whether that organization refuses user tokens and whether it is
// disabled (as is, for a team or organization token, the token's
// organization); one row per membership (one with NULLs for none), naming
// the team of a membership through a team when the provider can
// (MemberTeamsSQL). What it reads is kept only under the authentication
// epoch (cache.go), so a revoked token, a removed user or membership, or a
// changed organization setting counts on the very next request, on every
// replica. "" when the providers cannot say it in SQL.
//
// Its arguments are the token's hash twice. userQuery is the same query
// for a token known to be a user's (userAuthQuery).
func (s *Service) authQuery() string { return s.buildAuthQuery(false) }

// userAuthQuery is authQuery for a token already seen to be user's token
// for a user (the kind and subject of a token never change, see
// tokenSubjects): it reads the same token, user and memberships afresh,
// without the joins of the other kinds, and filters the memberships by
// the subject given rather than by a search of the token. Its arguments
// are the subject, the hash and the subject again; a token whose hash no
// longer names a user token of that subject reads no row. "" when the
// providers cannot say it in SQL.
func (s *Service) userAuthQuery() string {
	s.userQueryOnce.Do(func() { s.userQuery = s.buildAuthQuery(true) })
	return s.userQuery
}

func (s *Service) buildAuthQuery(user bool) string {
	m, ok1 := s.memberships.(MembershipsSQL)
	o, ok2 := s.orgs.(OrganizationsSQL)
	if !ok1 || !ok2 {
		return ""
	}
	users := `SELECT user_id, organization_name, owner, NULL AS team_id, NULL AS team_name, NULL AS team_attrs, NULL AS team_created_at FROM (` +
		m.UserOrganizationsSQL() + `) uo`
	if mt, ok := s.memberships.(MemberTeamsSQL); ok {
		users = mt.UserTeamsSQL()
	}
	if user {
		return `SELECT t.id, t.kind, t.subject, t.created_at, t.last_used_at, t.expired_at,
		u.id, u.username, u.is_site_admin, x.organization_name, x.owner, d.name,
		x.team_id, x.team_name, x.team_attrs, x.team_created_at, u.is_suspended, od.name
		FROM tokens t
		LEFT JOIN users u ON u.id = t.subject
		LEFT JOIN (SELECT * FROM (` + users + `) um WHERE um.user_id = ?) x ON x.user_id = u.id
		LEFT JOIN (` + o.UserTokensDisabledSQL() + `) d ON d.name = x.organization_name
		LEFT JOIN (` + o.DisabledOrganizationsSQL() + `) od ON od.name = x.organization_name
		WHERE t.hash = ? AND t.kind = '` + string(KindUser) + `' AND t.subject = ?`
	}
	teams, orgIDs := `SELECT NULL AS id, NULL AS organization_name, NULL AS owners`, `SELECT NULL AS id, NULL AS name`
	if ts, ok := s.memberships.(TeamsSQL); ok {
		teams = ts.TeamTokensSQL()
	}
	if oq, ok := s.orgs.(OrganizationIDsSQL); ok {
		orgIDs = oq.OrganizationIDsSQL()
	}
	runs := `SELECT NULL AS id, NULL AS workspace_id, NULL AS organization_name, NULL AS final`
	if rq, ok := s.runs.(RunsSQL); ok {
		runs = rq.RunTokensSQL()
	}
	return `SELECT t.id, t.kind, t.subject, t.created_at, t.last_used_at, t.expired_at,
		u.id, u.username, u.is_site_admin, x.organization_name, x.owner, d.name,
		tm.organization_name, tm.owners, o.name,
		r.workspace_id, r.organization_name, r.final,
		x.team_id, x.team_name, x.team_attrs, x.team_created_at, u.is_suspended, od.name
		FROM tokens t
		LEFT JOIN users u ON t.kind = 'user' AND u.id = t.subject
		LEFT JOIN (SELECT * FROM (` + users + `) um WHERE um.user_id = (SELECT subject FROM tokens WHERE hash = ?)) x ON x.user_id = u.id
		LEFT JOIN (` + o.UserTokensDisabledSQL() + `) d ON d.name = x.organization_name
		LEFT JOIN (` + teams + `) tm ON t.kind = '` + string(KindTeam) + `' AND tm.id = t.subject
		LEFT JOIN (` + orgIDs + `) o ON t.kind IN ('` + string(KindOrganization) + `', '` + string(KindAuditTrails) + `') AND o.id = t.subject
		LEFT JOIN (` + runs + `) r ON t.kind = '` + string(KindRun) + `' AND r.id = t.subject
		LEFT JOIN (` + o.DisabledOrganizationsSQL() + `) od ON od.name = COALESCE(x.organization_name, tm.organization_name, o.name, r.organization_name)
		WHERE t.hash = ?`
}

// newTokenSubjects remembers, by token hash, the subject of the user
// tokens this replica has authenticated. A token's kind and subject never
// change (no statement updates them), so this holds nothing that can go
// stale: a request that cannot use a kept principal (cache.go) reads the
// token, its user and memberships from the store (userAuthQuery), and a
// token deleted or replaced reads no row there and is looked up afresh.
func newTokenSubjects() *core.Bounded[string, string] {
	return &core.Bounded[string, string]{Max: 4096}
}

// sqlKinds are the token kinds the one query answers in full; the
// others go on to principal, which asks their own domains.
func (s *Service) sqlKinds(kind Kind) bool {
	switch kind {
	case KindUser:
		return true
	case KindTeam:
		_, ok := s.memberships.(TeamsSQL)
		return ok
	case KindOrganization, KindAuditTrails:
		_, ok := s.orgs.(OrganizationIDsSQL)
		return ok
	case KindRun:
		_, ok := s.runs.(RunsSQL)
		return ok
	}
	return false
}

// authenticateOnce is Authenticate in one store round trip for user, team,
// organization and run tokens (other kinds go on to principal, which asks
// their own domains). ok is false when the providers cannot say it in SQL.
func (s *Service) authenticateOnce(ctx context.Context, secret string) (p *Principal, ok bool, err error) {
	hash := HashToken(secret)
	subject, isUser := s.userTokens.Get(hash)
	// A token known to be of a kind whose principal is kept (cache.go):
	// the epoch says whether the kept one holds. Other tokens read none.
	var at keepAt
	if k, known := s.kept.Get(hash); (isUser || known) && s.userAuthQuery() != "" {
		at.epoch, at.ok = s.readEpoch(ctx)
		if at.ok && known && k.epoch == at.epoch {
			p, err := s.fromKept(ctx, k)
			return p, true, err
		}
	}
	if isUser {
		if p, ok, err := s.authenticate(ctx, at, true, hash, subject, hash, subject); !ok || p != nil || core.KindOf(err) != core.KindUnauthorized {
			return p, ok, err
		}
		// No longer a user token of that subject (or refused): ask as
		// for an unknown token, which says why.
		s.userTokens.Forget(hash)
	}
	// The hash twice: the memberships are filtered by the token's subject
	// inside their derived table, so that SQLite searches them by user
	// (a bare join on the derived table materialized every membership of
	// every user on each request).
	return s.authenticate(ctx, at, false, hash, hash, hash)
}

// keepAt is the authentication epoch a request read before its one query
// (ok false: none was read, and the principal is not kept).
type keepAt struct {
	epoch int64
	ok    bool
}

// authRow is a row of authQuery.
type authRow struct {
	id, kind, subject           string
	created                     int64
	used, exp                   sql.NullInt64
	userID, username            sql.NullString
	siteAdmin                   sql.NullBool
	org, disabled               sql.NullString
	isOwner                     sql.NullInt64
	teamOrg, orgName            sql.NullString
	ownersTeam                  sql.NullInt64
	runWS, runOrg               sql.NullString
	runFinal                    sql.NullInt64
	teamID, teamName, teamAttrs sql.NullString
	teamCreated                 sql.NullInt64
	// suspended is the user's; orgDisabled names the row's organization
	// (the membership's, or a team, organization or run token's) when a
	// site admin has disabled it.
	suspended   sql.NullBool
	orgDisabled sql.NullString
}

// authenticate runs authQuery, or userAuthQuery when user, with args;
// hash is the token's. The principal of a kind that is kept (KeptKinds)
// is kept under at.
func (s *Service) authenticate(ctx context.Context, at keepAt, user bool, hash string, args ...any) (p *Principal, ok bool, err error) {
	var query string
	if user {
		query = s.userAuthQuery()
	} else {
		query = s.authQuery()
	}
	if query == "" {
		return nil, false, nil
	}
	// Without the request's cancellation: the statement is a few index
	// searches, and with a context that can end, database/sql and the
	// drivers start a goroutine per statement (SQLite's a watcher and a
	// progress handler) to interrupt it when it does, on every request.
	rows, err := s.db.Query(context.WithoutCancel(ctx), query, args...)
	if err != nil {
		return nil, true, fmt.Errorf("looking up token: %w", err)
	}
	defer rows.Close()
	// The columns scan into one row struct, allocated once, rather than
	// into a variable each (every one of which Scan's arguments would
	// move to the heap, on each row).
	var (
		c       authRow
		seen    bool
		member  []string
		owner   []string
		blocked []string
		off     []string
		teams   []MemberTeam
	)
	dest := []any{&c.id, &c.kind, &c.subject, &c.created, &c.used, &c.exp, &c.userID, &c.username, &c.siteAdmin, &c.org, &c.isOwner, &c.disabled,
		&c.teamOrg, &c.ownersTeam, &c.orgName, &c.runWS, &c.runOrg, &c.runFinal, &c.teamID, &c.teamName, &c.teamAttrs, &c.teamCreated,
		&c.suspended, &c.orgDisabled}
	if user {
		// userAuthQuery leaves out the team, organization and run token
		// columns.
		dest = append(dest[:12], dest[18:]...)
	}
	for rows.Next() {
		if err := rows.Scan(dest...); err != nil {
			return nil, true, fmt.Errorf("looking up token: %w", err)
		}
		org, disabled, isOwner := c.org, c.disabled, c.isOwner
		teamID, teamName, teamAttrs, teamCreated := c.teamID, c.teamName, c.teamAttrs, c.teamCreated
		seen = true
		if !org.Valid {
			continue
		}
		if c.orgDisabled.Valid {
			// A disabled organization: no membership, no team of it
			// counts (Principal.Disabled says why).
			if !slices.Contains(off, org.String) {
				off = append(off, org.String)
			}
			continue
		}
		if teamID.Valid {
			teams = append(teams, MemberTeam{ID: teamID.String, Organization: org.String, Name: teamName.String, Attrs: teamAttrs.String, CreatedAt: teamCreated.Int64})
		}
		if !slices.Contains(member, org.String) {
			member = append(member, org.String)
		}
		if isOwner.Int64 == 1 && !slices.Contains(owner, org.String) {
			owner = append(owner, org.String)
		}
		if disabled.Valid && !slices.Contains(blocked, org.String) {
			blocked = append(blocked, org.String)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, true, fmt.Errorf("looking up token: %w", err)
	}
	rows.Close()
	id, kind, subject, created, used, exp := c.id, c.kind, c.subject, c.created, c.used, c.exp
	userID, username, siteAdmin := c.userID, c.username, c.siteAdmin
	teamOrg, ownersTeam, orgName, runWS, runOrg, runFinal := c.teamOrg, c.ownersTeam, c.orgName, c.runWS, c.runOrg, c.runFinal
	suspended, orgDisabled := c.suspended, c.orgDisabled
	if !seen {
		return nil, true, core.Unauthorized("invalid token")
	}
	now := core.Now()
	if exp.Valid && core.FromMicros(exp.Int64).Before(now) {
		return nil, true, core.Unauthorized("token has expired")
	}
	if err := s.recordUse(ctx, id, used, now); err != nil {
		return nil, true, err
	}
	switch k := Kind(kind); {
	case !s.sqlKinds(k):
		p, err := s.principal(ctx, id, k, subject, created)
		return p, true, err
	case k == KindTeam || k == KindOrganization || k == KindAuditTrails:
		if k == KindTeam && !teamOrg.Valid {
			return nil, true, core.Unauthorized("the token's team no longer exists")
		}
		if k != KindTeam && !orgName.Valid {
			return nil, true, core.Unauthorized("the token's organization no longer exists")
		}
		p := &Principal{Kind: k, TokenID: id, Organization: orgName.String}
		if k == KindTeam {
			p.TeamID, p.Organization, p.OwnersTeam = subject, teamOrg.String, ownersTeam.Int64 == 1
		}
		if err := refuseDisabled(p, orgDisabled.Valid); err != nil {
			return nil, true, err
		}
		ttl, applies, err := s.tokenTTL(ctx, p)
		if err == nil {
			err = ttlExceeded(p, created, ttl, applies, now)
		}
		if err != nil {
			return nil, true, err
		}
		s.keep(hash, at, kept{principal: *p, used: recorded(used, now), exp: exp, created: created, ttl: ttl, ttlApplies: applies})
		return p, true, nil
	case k == KindRun:
		// As principal says it: a missing or finished run's token is refused.
		if !runWS.Valid || runFinal.Int64 == 1 {
			return nil, true, core.Unauthorized("the token's run no longer exists")
		}
		p := &Principal{Kind: k, TokenID: id, RunID: subject, WorkspaceID: runWS.String, Organization: runOrg.String}
		if err := refuseDisabled(p, orgDisabled.Valid); err != nil {
			return nil, true, err
		}
		return p, true, nil
	}
	if !userID.Valid {
		return nil, true, core.Unauthorized("the token's user no longer exists")
	}
	if suspended.Bool {
		return nil, true, userSuspended(username.String)
	}
	s.userTokens.Put(hash, subject)
	slices.Sort(member)
	slices.Sort(owner)
	slices.Sort(blocked)
	slices.Sort(off)
	if mt, ok := s.memberships.(MemberTeamsSQL); ok {
		mt.RememberUserTeams(ctx, userID.String, member, teams)
	}
	p = &Principal{Kind: KindUser, TokenID: id, UserID: userID.String, Username: username.String, SiteAdmin: siteAdmin.Bool,
		Orgs: member, Owns: owner, UserTokensBlocked: blocked, Disabled: off}
	s.keep(hash, at, kept{principal: *p, teams: teams, used: recorded(used, now), exp: exp})
	return p, true, nil
}

// recordUse records a token's use at most once a minute, so that reads
// stay reads.
func (s *Service) recordUse(ctx context.Context, id string, used sql.NullInt64, now time.Time) error {
	if !useDue(used, now) {
		return nil
	}
	if _, err := s.db.Exec(ctx, `UPDATE tokens SET last_used_at = ? WHERE id = ?`, core.Micros(now), id); err != nil {
		return fmt.Errorf("recording token use: %w", err)
	}
	return nil
}

// useDue reports whether a token last used at used should have its use
// recorded at now.
func useDue(used sql.NullInt64, now time.Time) bool {
	return !used.Valid || now.Sub(core.FromMicros(used.Int64)) > time.Minute
}
