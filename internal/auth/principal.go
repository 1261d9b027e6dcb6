package auth

import (
	"context"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/core"
)

// Kind is the kind of token a caller presented.
type Kind string

// Token names a token of the kind with its article, as messages say it:
// "a team token", "an agent token", "a user token" (u sounds "you").
func (k Kind) Token() string {
	if k != "" && strings.ContainsRune("aeio", rune(k[0])) {
		return "an " + string(k) + " token"
	}
	return "a " + string(k) + " token"
}

// Token kinds.
const (
	KindUser         Kind = "user"
	KindTeam         Kind = "team"
	KindOrganization Kind = "organization"
	KindRun          Kind = "run"
	KindAgent        Kind = "agent"
	// KindAuditTrails tokens may only read their organization's audit
	// trail: the audit Recorder refuses them on every other route.
	KindAuditTrails Kind = "audit-trails"
	// KindTaskResult tokens are the access tokens sent to a run task
	// service: they reach only their task result's callback and their
	// run's plan JSON and configuration download (internal/authz), and
	// are deleted when the task stage ends.
	KindTaskResult Kind = "task-result"
	// KindTestRun tokens are given to terraform test inside a module's
	// test run: they read their organization's private registry (and
	// what other organizations share with it), nothing else
	// (internal/authz), and stop working when the test run ends.
	KindTestRun Kind = "test-run"
	// KindRunner is the server's own in-process runner speaking the job
	// protocol (internal/jobapi). No token has this kind: the in-process
	// transport puts the principal in the request itself.
	KindRunner Kind = "runner"
)

// Principal is an authenticated caller.
type Principal struct {
	Kind    Kind
	TokenID string

	// User tokens.
	UserID    string
	Username  string
	SiteAdmin bool
	// Orgs are the organizations a user belongs to (through teams), and
	// Owns those where the user is in the owners team.
	Orgs []string
	Owns []string
	// UserTokensBlocked are organizations (among Orgs) that refuse user
	// tokens (user-tokens-enabled=false).
	UserTokensBlocked []string
	// Disabled are organizations the user belongs to that a site admin
	// has disabled (the admin API's is-disabled): they are in neither
	// Orgs nor Owns, so the user may do nothing there; they are kept to
	// say why (OrganizationDisabled).
	Disabled []string

	// Team tokens; OwnersTeam when the team is its organization's owners
	// team, whose token has owner rights as in HCP Terraform.
	TeamID     string
	OwnersTeam bool

	// Organization is the organization of a team, organization, run or
	// agent token.
	Organization string

	// Run tokens: the run and its workspace.
	RunID       string
	WorkspaceID string

	// Agent tokens: the agent pool whose jobs the token reaches.
	AgentPoolID string

	// Task result tokens: the result (and RunID, WorkspaceID and
	// Organization of its run, with the run's configuration version).
	TaskResultID    string
	ConfigVersionID string

	// Test run tokens: the module test run (and Organization, the
	// module's).
	TestRunID string
}

// CanAccessOrganization reports whether the principal may see anything in
// the named organization. Resources elsewhere must be answered with 404.
func (p *Principal) CanAccessOrganization(name string) bool {
	if p == nil {
		return false
	}
	if p.SiteAdmin {
		return true
	}
	if p.Kind == KindUser {
		return slices.Contains(p.Orgs, name)
	}
	return p.Organization == name
}

// Organizations says which organizations CanAccessOrganization lets the
// principal into, for a list to select them in the store: all of them, or
// those named.
func (p *Principal) Organizations() (all bool, names []string) {
	switch {
	case p == nil:
		return false, nil
	case p.SiteAdmin:
		return true, nil
	case p.Kind == KindUser:
		return false, p.Orgs
	case p.Organization != "":
		return false, []string{p.Organization}
	}
	return false, nil
}

// IsOwner reports whether the principal has owner rights in the organization:
// a site admin, a member of its owners team, the owners team's token, or its
// organization token.
func (p *Principal) IsOwner(name string) bool {
	if p == nil {
		return false
	}
	if p.SiteAdmin {
		return true
	}
	switch p.Kind {
	case KindUser:
		return slices.Contains(p.Owns, name)
	case KindOrganization:
		return p.Organization == name
	case KindTeam:
		return p.OwnersTeam && p.Organization == name
	}
	return false
}

// IsUser reports whether the caller presented a user token.
func (p *Principal) IsUser() bool { return p != nil && p.Kind == KindUser }

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// AsOrganization returns ctx acting as organization org itself, with its
// organization token's standing: the platform's own work for a decision
// already made (a stack's deployment, a VCS run, a no-code provision's
// configuration and first run).
func AsOrganization(ctx context.Context, org string) context.Context {
	return WithPrincipal(ctx, &Principal{Kind: KindOrganization, Organization: org})
}

// FromContext returns the caller, or nil.
func FromContext(ctx context.Context) *Principal {
	p, _ := ctx.Value(ctxKey{}).(*Principal)
	return p
}

// Organization returns core.ErrNotFound unless the caller in ctx may access
// the organization: the check every service makes before touching one.
func CheckOrganization(ctx context.Context, org string) error {
	p := FromContext(ctx)
	if p != nil && !p.SiteAdmin && slices.Contains(p.Disabled, org) {
		return OrganizationDisabled(org)
	}
	if p != nil && p.Kind == KindUser && slices.Contains(p.UserTokensBlocked, org) {
		return core.Unauthorized("organization %q does not accept user tokens: use a team or organization token", org)
	}
	if !p.CanAccessOrganization(org) {
		return core.NotFound("organization %q not found", org)
	}
	return nil
}

// OrganizationDisabled is the refusal of a member of a disabled
// organization (and of every token of it: refuseDisabled).
func OrganizationDisabled(org string) error {
	return core.Forbidden("organization %q is disabled: a site administrator must enable it again", org)
}

// RequireKind refuses callers whose token is not of one of the kinds.
func RequireKind(ctx context.Context, kinds ...Kind) error {
	p := FromContext(ctx)
	if p == nil {
		return core.Unauthorized("no token given")
	}
	if p.SiteAdmin || slices.Contains(kinds, p.Kind) {
		return nil
	}
	return core.Forbidden("%s cannot be used for this request", p.Kind.Token())
}
