package auth

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Memberships tells which organizations users and teams belong to; the team
// package provides it.
type Memberships interface {
	// UserOrganizations returns the organizations the user is a member of
	// and those where the user is in the owners team.
	UserOrganizations(ctx context.Context, userID string) (member, owner []string, err error)
	// TeamOrganization returns the organization of a team.
	TeamOrganization(ctx context.Context, teamID string) (string, error)
	// IsOwnersTeam reports whether a team is its organization's owners team.
	IsOwnersTeam(ctx context.Context, teamID string) (bool, error)
}

// Organizations resolves organization IDs (organization tokens name their
// organization by ID so that a rename keeps them valid).
type Organizations interface {
	NameByID(ctx context.Context, id string) (string, error)
	// UserTokensDisabled returns those of the named organizations that
	// refuse user tokens.
	UserTokensDisabled(ctx context.Context, names []string) ([]string, error)
	// DisabledOrganizations returns those of the named organizations
	// that a site admin has disabled.
	DisabledOrganizations(ctx context.Context, names []string) ([]string, error)
}

// RunResolver resolves the workspace and organization of a run for run tokens.
type RunResolver interface {
	RunWorkspace(ctx context.Context, runID string) (workspaceID, org string, err error)
}

// TaskResultScope is what a task result token reaches: its result's run.
type TaskResultScope struct {
	RunID, WorkspaceID, Organization, ConfigVersionID string
}

// TaskResultResolver resolves the run of a task result for task result
// tokens (the run task domain provides it).
type TaskResultResolver interface {
	TaskResultScope(ctx context.Context, resultID string) (TaskResultScope, error)
}

// TestRunResolver names the organization of a running module test run
// for test run tokens (the module test domain provides it); a test run
// that is not running is not found.
type TestRunResolver interface {
	RunningTestRunOrganization(ctx context.Context, testRunID string) (org string, err error)
}

// Service keeps users and tokens and authenticates requests.
type Service struct {
	db          *store.DB
	memberships Memberships
	orgs        Organizations
	runs        RunResolver
	taskResults TaskResultResolver
	testRuns    TestRunResolver
	agentPools  AgentPoolResolver
	// TokenTTL, when set, is the longest a token of kind may live in
	// org (the organization's token TTL policy); older organization and
	// team tokens are refused.
	TokenTTL func(ctx context.Context, org string, kind Kind) (time.Duration, error)

	// userTokens and userQuery: the one query for a token already seen
	// to be a user's (userAuthQuery).
	userTokens    *core.Bounded[string, string]
	userQueryOnce sync.Once
	userQuery     string
	// kept: the principals of the kinds kept (KeptKinds), by token hash,
	// with the authentication epoch each was read under (cache.go).
	kept *core.Bounded[string, *keptPrincipal]
}

// NewService returns an auth service. runs may be nil until runs exist.
func NewService(db *store.DB, m Memberships, o Organizations, runs RunResolver) *Service {
	return &Service{db: db, memberships: m, orgs: o, runs: runs, userTokens: newTokenSubjects(), kept: newKeptPrincipals()}
}

// SetRunResolver wires the run domain in once it exists.
func (s *Service) SetRunResolver(r RunResolver) { s.runs = r }

// AgentPoolResolver names the organization of an agent pool: agent tokens
// belong to a pool.
type AgentPoolResolver interface {
	PoolOrganizationSystem(ctx context.Context, poolID string) (org string, err error)
}

// SetAgentPoolResolver wires the agent domain in.
func (s *Service) SetAgentPoolResolver(r AgentPoolResolver) { s.agentPools = r }

// SetTaskResultResolver wires the run task domain in.
func (s *Service) SetTaskResultResolver(r TaskResultResolver) { s.taskResults = r }

// SetTestRunResolver wires the module test domain in.
func (s *Service) SetTestRunResolver(r TestRunResolver) { s.testRuns = r }

// Token is a stored token (never its secret).
type Token struct {
	ID          string
	Kind        Kind
	Subject     string
	Description string
	CreatedBy   string
	CreatedAt   time.Time
	LastUsedAt  *time.Time
	ExpiredAt   *time.Time
	// Legacy marks the one regenerable token of a team or organization.
	Legacy bool
}

// NewToken describes a token to create.
type NewToken struct {
	Kind        Kind
	Subject     string
	Description string
	CreatedBy   string
	ExpiredAt   *time.Time
	Legacy      bool
}

// HashToken is how tokens are stored.
func HashToken(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// CreateToken stores a new token and returns it with its secret, which is
// shown once and never again.
func (s *Service) CreateToken(ctx context.Context, q store.Q, n NewToken) (*Token, string, error) {
	t := &Token{
		ID:          core.NewID(core.PrefixToken),
		Kind:        n.Kind,
		Subject:     n.Subject,
		Description: n.Description,
		CreatedBy:   n.CreatedBy,
		CreatedAt:   core.Now(),
		ExpiredAt:   n.ExpiredAt,
		Legacy:      n.Legacy,
	}
	secret := core.RandomString(14) + ".atlasv1." + core.RandomString(60)
	var exp *int64
	if n.ExpiredAt != nil {
		v := core.Micros(*n.ExpiredAt)
		exp = &v
	}
	_, err := q.Exec(ctx, `INSERT INTO tokens (id, kind, subject, hash, description, created_by, created_at, expired_at, legacy) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, string(t.Kind), t.Subject, HashToken(secret), t.Description, t.CreatedBy, core.Micros(t.CreatedAt), exp, t.Legacy)
	if err != nil {
		return nil, "", fmt.Errorf("creating %s token: %w", n.Kind, err)
	}
	return t, secret, nil
}

// RegenerateToken replaces the subject's legacy token of n.Kind (if any)
// with a new one, in one transaction: the old secret stops working.
func (s *Service) RegenerateToken(ctx context.Context, n NewToken) (*Token, string, error) {
	n.Legacy = true
	var t *Token
	var secret string
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE kind = ? AND subject = ? AND legacy = ?`, string(n.Kind), n.Subject, true); err != nil {
			return err
		}
		var err error
		t, secret, err = s.CreateToken(ctx, tx, n)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	return t, secret, nil
}

// ImportToken stores a token whose secret was chosen elsewhere (the site
// token given with --site-token). An existing token with that secret is kept.
func (s *Service) ImportToken(ctx context.Context, n NewToken, secret string) error {
	// ON CONFLICT: a token already imported (a restart, or a replica
	// starting at the same moment) is left as it is.
	_, err := s.db.Exec(ctx, `INSERT INTO tokens (id, kind, subject, hash, description, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING`,
		core.NewID(core.PrefixToken), string(n.Kind), n.Subject, HashToken(secret), n.Description, n.CreatedBy, core.Micros(core.Now()))
	return err
}

const tokenCols = `id, kind, subject, description, created_by, created_at, last_used_at, expired_at, legacy`

func scanToken(sc interface{ Scan(...any) error }) (*Token, error) {
	var t Token
	var kind string
	var created int64
	var used, exp sql.NullInt64
	if err := sc.Scan(&t.ID, &kind, &t.Subject, &t.Description, &t.CreatedBy, &created, &used, &exp, &t.Legacy); err != nil {
		return nil, err
	}
	t.Kind = Kind(kind)
	t.CreatedAt = core.FromMicros(created)
	if used.Valid {
		v := core.FromMicros(used.Int64)
		t.LastUsedAt = &v
	}
	if exp.Valid {
		v := core.FromMicros(exp.Int64)
		t.ExpiredAt = &v
	}
	return &t, nil
}

// GetToken returns a token by ID.
func (s *Service) GetToken(ctx context.Context, id string) (*Token, error) {
	t, err := scanToken(s.db.QueryRow(ctx, `SELECT `+tokenCols+` FROM tokens WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("token %s not found", id)
	}
	return t, err
}

// ListTokens returns the tokens of kind of the subjects, oldest first.
func (s *Service) ListTokens(ctx context.Context, kind Kind, subjects ...string) ([]*Token, error) {
	if len(subjects) == 0 {
		return []*Token{}, nil
	}
	in, args := store.In(subjects)
	return store.All(ctx, s.db, scanToken, `SELECT `+tokenCols+` FROM tokens WHERE kind = ? AND subject IN (`+in+`) ORDER BY created_at, id`, append([]any{string(kind)}, args...)...)
}

// DeleteTokensOf removes the tokens of kind whose subjects subjectsSQL
// selects (with args): those of a deleted thing's parts, in its deletion.
func DeleteTokensOf(ctx context.Context, q store.Q, kind Kind, subjectsSQL string, args ...any) error {
	_, err := q.Exec(ctx, `DELETE FROM tokens WHERE kind = ? AND subject IN (`+subjectsSQL+`)`, append([]any{string(kind)}, args...)...)
	return err
}

// DeleteToken removes a token.
func (s *Service) DeleteToken(ctx context.Context, q store.Q, id string) error {
	res, err := q.Exec(ctx, `DELETE FROM tokens WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("token %s not found", id)
	}
	return nil
}

// DeleteTokens removes every token of a subject and kind, optionally only
// those with the given description ("" matches all).
func (s *Service) DeleteTokens(ctx context.Context, q store.Q, kind Kind, subject string) error {
	_, err := q.Exec(ctx, `DELETE FROM tokens WHERE kind = ? AND subject = ?`, string(kind), subject)
	return err
}

// Authenticate turns a bearer token into a principal.
func (s *Service) Authenticate(ctx context.Context, secret string) (*Principal, error) {
	if p, ok, err := s.authenticateOnce(ctx, secret); ok {
		return p, err
	}
	var (
		id, kind, subject string
		created           int64
		used, exp         sql.NullInt64
	)
	err := s.db.QueryRow(ctx, `SELECT id, kind, subject, created_at, last_used_at, expired_at FROM tokens WHERE hash = ?`, HashToken(secret)).
		Scan(&id, &kind, &subject, &created, &used, &exp)
	if store.IsNoRows(err) {
		return nil, core.Unauthorized("invalid token")
	}
	if err != nil {
		return nil, fmt.Errorf("looking up token: %w", err)
	}
	now := core.Now()
	if exp.Valid && core.FromMicros(exp.Int64).Before(now) {
		return nil, core.Unauthorized("token has expired")
	}
	if err := s.recordUse(ctx, id, used, now); err != nil {
		return nil, err
	}
	return s.principal(ctx, id, Kind(kind), subject, created)
}

// PrincipalOfToken rebuilds, as it is now, the principal of a token that
// authenticated earlier: work done on a caller's behalf after the request
// ends (a run queued when an upload finishes) is checked and attributed as
// that caller. A token deleted or expired since is refused.
func (s *Service) PrincipalOfToken(ctx context.Context, tokenID string) (*Principal, error) {
	var kind, subject string
	var created int64
	var exp sql.NullInt64
	err := s.db.QueryRow(ctx, `SELECT kind, subject, created_at, expired_at FROM tokens WHERE id = ?`, tokenID).Scan(&kind, &subject, &created, &exp)
	if store.IsNoRows(err) {
		return nil, core.Unauthorized("the token %s no longer exists", tokenID)
	}
	if err != nil {
		return nil, fmt.Errorf("looking up token %s: %w", tokenID, err)
	}
	if exp.Valid && core.FromMicros(exp.Int64).Before(core.Now()) {
		return nil, core.Unauthorized("the token %s has expired", tokenID)
	}
	return s.principal(ctx, tokenID, Kind(kind), subject, created)
}

// principal builds the principal of a token from its kind and subject; a
// team or organization token older than its organization's TTL policy
// (created: its creation time in microseconds) is refused.
func (s *Service) principal(ctx context.Context, id string, kind Kind, subject string, created int64) (*Principal, error) {
	var err error
	p := &Principal{Kind: kind, TokenID: id}
	switch p.Kind {
	case KindUser:
		u, err := s.GetUser(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's user no longer exists")
		}
		if u.Suspended {
			return nil, userSuspended(u.Username)
		}
		p.UserID, p.Username, p.SiteAdmin = u.ID, u.Username, u.SiteAdmin
		p.Orgs, p.Owns, err = s.memberships.UserOrganizations(ctx, u.ID)
		if err != nil {
			return nil, err
		}
		if len(p.Orgs) > 0 {
			if p.Disabled, err = s.orgs.DisabledOrganizations(ctx, p.Orgs); err != nil {
				return nil, err
			}
			p.Orgs = slices.DeleteFunc(p.Orgs, func(o string) bool { return slices.Contains(p.Disabled, o) })
			p.Owns = slices.DeleteFunc(p.Owns, func(o string) bool { return slices.Contains(p.Disabled, o) })
		}
		if len(p.Orgs) > 0 {
			if p.UserTokensBlocked, err = s.orgs.UserTokensDisabled(ctx, p.Orgs); err != nil {
				return nil, err
			}
		}
	case KindTeam:
		p.TeamID = subject
		p.Organization, err = s.memberships.TeamOrganization(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's team no longer exists")
		}
		if p.OwnersTeam, err = s.memberships.IsOwnersTeam(ctx, subject); err != nil {
			return nil, err
		}
	case KindAgent:
		if s.agentPools == nil {
			return nil, core.Unauthorized("agent tokens are not accepted")
		}
		p.AgentPoolID = subject
		p.Organization, err = s.agentPools.PoolOrganizationSystem(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's agent pool no longer exists")
		}
	case KindOrganization, KindAuditTrails:
		p.Organization, err = s.orgs.NameByID(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's organization no longer exists")
		}
	case KindRun:
		if s.runs == nil {
			return nil, core.Unauthorized("run tokens are not accepted")
		}
		p.RunID = subject
		p.WorkspaceID, p.Organization, err = s.runs.RunWorkspace(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's run no longer exists")
		}
	case KindTaskResult:
		if s.taskResults == nil {
			return nil, core.Unauthorized("task result tokens are not accepted")
		}
		sc, err := s.taskResults.TaskResultScope(ctx, subject)
		if err != nil {
			return nil, core.Unauthorized("the token's task result no longer exists")
		}
		p.TaskResultID, p.RunID, p.WorkspaceID, p.Organization, p.ConfigVersionID = subject, sc.RunID, sc.WorkspaceID, sc.Organization, sc.ConfigVersionID
	case KindTestRun:
		if s.testRuns == nil {
			return nil, core.Unauthorized("test run tokens are not accepted")
		}
		p.TestRunID = subject
		p.Organization, err = s.testRuns.RunningTestRunOrganization(ctx, subject)
		if core.KindOf(err) == core.KindNotFound {
			return nil, core.Unauthorized("the token's test run has ended")
		}
		if err != nil {
			return nil, err
		}
	default:
		return nil, core.Unauthorized("unknown token kind")
	}
	if p.Kind != KindUser {
		disabled, err := s.orgs.DisabledOrganizations(ctx, []string{p.Organization})
		if err != nil {
			return nil, err
		}
		if err := refuseDisabled(p, len(disabled) > 0); err != nil {
			return nil, err
		}
	}
	return s.checkTTL(ctx, p, created)
}

// userSuspended is the refusal of a suspended user's tokens and sessions.
func userSuspended(username string) error {
	return core.Unauthorized("user %q is suspended: a site administrator must unsuspend the account", username)
}

// refuseDisabled is the one decision on a token that belongs to an
// organization (every kind but a user's: team, organization,
// audit-trails, run, agent and task result tokens): refused, saying why
// (403), while a site admin has that organization disabled (disabled).
// Both ways of authenticating ask it (the one query and principal), so it
// holds on the next request on every replica, and for work done later on
// a token's behalf (PrincipalOfToken). A user's token is not refused: the
// user's membership of a disabled organization does not count
// (Principal.Disabled), and their other organizations do.
func refuseDisabled(p *Principal, disabled bool) error {
	if disabled && p.Kind != KindUser {
		return OrganizationDisabled(p.Organization)
	}
	return nil
}

// checkTTL refuses a team or organization token older than its
// organization's token TTL policy allows.
func (s *Service) checkTTL(ctx context.Context, p *Principal, created int64) (*Principal, error) {
	ttl, applies, err := s.tokenTTL(ctx, p)
	if err != nil {
		return nil, err
	}
	if err := ttlExceeded(p, created, ttl, applies, core.Now()); err != nil {
		return nil, err
	}
	return p, nil
}

// tokenTTL is the longest p's token may live (applies is false when no
// limit applies to its kind).
func (s *Service) tokenTTL(ctx context.Context, p *Principal) (ttl time.Duration, applies bool, err error) {
	if s.TokenTTL == nil || (p.Kind != KindTeam && p.Kind != KindOrganization) {
		return 0, false, nil
	}
	ttl, err = s.TokenTTL(ctx, p.Organization, p.Kind)
	return ttl, err == nil, err
}

// ttlExceeded refuses a token created at created (micros) that is older at
// now than ttl allows.
func ttlExceeded(p *Principal, created int64, ttl time.Duration, applies bool, now time.Time) error {
	if applies && now.Sub(core.FromMicros(created)) > ttl {
		return core.Unauthorized("token is older than the organization's %s token TTL policy allows", p.Kind)
	}
	return nil
}

// Middleware requires a valid bearer token and puts the principal in the
// request context. Failures are JSON:API 401s written by onError.
func (s *Service) Middleware(onError func(http.ResponseWriter, *http.Request, error)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := r.Header.Get("Authorization")
			secret, ok := strings.CutPrefix(h, "Bearer ")
			if !ok {
				secret, ok = strings.CutPrefix(h, "bearer ")
			}
			secret = strings.TrimSpace(secret)
			if !ok || secret == "" {
				onError(w, r, core.Unauthorized("this request needs an API token in the Authorization header"))
				return
			}
			p, err := s.Authenticate(r.Context(), secret)
			if err != nil {
				onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}
