package authz

import (
	"context"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

type modelKey struct{}

// WithModel returns ctx carrying the model, so that services deep in a
// request ask the same model the guard asked (the guard does this for every
// API request).
func WithModel(ctx context.Context, s *Service) context.Context {
	return context.WithValue(ctx, modelKey{}, s)
}

// AsPlatform returns ctx for the platform's own work in organization org
// that a decision made in this request already covers (a no-code
// provision's variables, configuration and first run, which
// ProjectProvisionNoCode and the workspace's creation decided): the
// organization acts with no model in ctx, as in the platform's background
// work (stack deployments, VCS runs), and is decided as the organization's
// owner. Never for work that no decision covered.
func AsPlatform(ctx context.Context, org string) context.Context {
	return context.WithValue(auth.AsOrganization(ctx, org), modelKey{}, (*Service)(nil))
}

// Allows asks the model in ctx whether the caller in ctx may do action on
// res: nil, or a core.Forbidden / core.NotFound error. Services call it for
// their decisions. Without a model in ctx (a service used on its own, as
// in its package tests) only owners are allowed, the strictest answer,
// but for an action whose rule looks at the token alone (scope "any"),
// which decides as with a model.
func Allows(ctx context.Context, action Action, res Resource) error {
	s, _ := ctx.Value(modelKey{}).(*Service)
	if r, ok := rules[action]; s == nil && ok && r.scope == scopeAny {
		return (&Service{}).Decide(ctx, auth.FromContext(ctx), action, res)
	}
	if s == nil {
		if auth.FromContext(ctx).IsOwner(res.Organization) {
			return nil
		}
		return core.Forbidden("only owners of organization %q may do this", res.Organization)
	}
	if res.WorkspaceID != "" && res.ProjectID == "" {
		if full, err := s.resolver.Resolve(ctx, res.WorkspaceID); err == nil {
			res = full
		}
	}
	return s.Check(ctx, action, res)
}

// RequireSiteAdmin is Allows for SiteAdmin: the site administrators'
// routes and services ask it, and everyone else is answered 404.
func RequireSiteAdmin(ctx context.Context) error { return Allows(ctx, SiteAdmin, Resource{}) }

// AllowsTeam is Allows for a team action on a team the caller's request
// already read (t), which the model does not read again. Without a model
// in ctx only owners are allowed.
func AllowsTeam(ctx context.Context, action Action, t Team) error {
	decide, err := teamDecision(ctx, t.Organization, action)
	if err != nil {
		return err
	}
	return decide(t)
}

// teamDecision is the decision of a team action for the caller in ctx on
// org's teams, made on the caller's standing read once: AllowsTeam asks it
// of one team, TeamsAllowing of each team of a list. Without a model in
// ctx only owners are allowed.
func teamDecision(ctx context.Context, org string, action Action) (func(Team) error, error) {
	p := auth.FromContext(ctx)
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		owner := p.IsOwner(org)
		return func(Team) error {
			if owner {
				return nil
			}
			return core.Forbidden("only owners of organization %q may do this", org)
		}, nil
	}
	return s.teamDecision(ctx, p, org, action)
}

// VisibleTeams says which of org's teams the caller in ctx may see (a
// list names only those), deciding as TeamRead does, on the caller's
// standing read once. Without a model in ctx only owners see any.
func VisibleTeams(ctx context.Context, org string) (func(Team) bool, error) {
	p := auth.FromContext(ctx)
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		owner := p.IsOwner(org)
		return func(Team) bool { return owner }, nil
	}
	st, err := s.standing(ctx, p, org)
	if err != nil {
		return nil, err
	}
	return func(t Team) bool { return t.Organization == org && !st.run && st.seesTeam(t) }, nil
}

// TeamsAllowing says on which of org's teams the caller in ctx may do the
// team action, deciding as AllowsTeam does on the caller's standing read
// once (for a list of many teams). Without a model in ctx only owners may.
func TeamsAllowing(ctx context.Context, org string, action Action) (func(Team) bool, error) {
	decide, err := teamDecision(ctx, org, action)
	switch core.KindOf(err) {
	case core.KindUnauthorized, core.KindForbidden:
		// A caller no team decision admits (no token, a task result's,
		// an agent's): none of the teams.
		return func(Team) bool { return false }, nil
	}
	if err != nil {
		return nil, err
	}
	return func(t Team) bool { return t.Organization == org && decide(t) == nil }, nil
}

// ReadableWorkspaces says which of org's workspaces the caller in ctx may
// see (HCP Terraform lists only those), for a list to select them in SQL.
// where is a condition on the workspaces row aliased ws, with its args; ""
// when every workspace the organization check let through is readable
// (so too without a model in ctx). A run token's reach is decided
// workspace by workspace: then where is "" and each is the test to apply
// to every row (nil otherwise).
func ReadableWorkspaces(ctx context.Context, org string) (where string, args []any, each func(projectID, workspaceID string) bool, err error) {
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		return "", nil, nil, nil
	}
	p := auth.FromContext(ctx)
	st, err := s.standing(ctx, p, org)
	if err != nil {
		return "", nil, nil, err
	}
	switch {
	case st.run:
		return "", nil, func(_, id string) bool {
			w, err := s.workspace(ctx, p, st, Resource{Organization: org, WorkspaceID: id})
			return err == nil && w.Read
		}, nil
	case !st.member:
		return "1 = 0", nil, nil, nil
	case st.owner, st.orgToken, st.access.ManageWorkspaces, st.access.ManageProjects, st.access.ReadWorkspaces,
		// manage-policy-overrides sees every workspace (workspace()).
		st.access.ManagePolicyOverrides:
		return "", nil, nil, nil
	case len(st.teamIDs) == 0:
		return "1 = 0", nil, nil, nil
	}
	// Through a team's access to the workspace or to its project.
	in, teams := store.In(st.teamIDs)
	return `(ws.id IN (SELECT workspace_id FROM team_workspaces WHERE team_id IN (` + in + `)) OR ws.project_id IN (SELECT project_id FROM team_projects WHERE team_id IN (` + in + `)))`,
		append(teams, teams...), nil, nil
}

// ReadableProjects says which of org's projects the caller in ctx may read
// (ProjectRead), for a project list to select them in SQL: a condition on
// the projects row aliased p, with its args; "" when every project of the
// organization is readable (so too without a model in ctx).
func ReadableProjects(ctx context.Context, org string) (where string, args []any, err error) {
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		return "", nil, nil
	}
	st, err := s.standing(ctx, auth.FromContext(ctx), org)
	if err != nil {
		return "", nil, err
	}
	// As project() decides: the organization's access, else a team's
	// grant on the project.
	switch {
	case !st.member:
		return "1 = 0", nil, nil
	case st.owner, st.orgToken, st.access.ManageProjects, st.access.ReadProjects, st.access.ManageWorkspaces:
		return "", nil, nil
	case len(st.teamIDs) == 0:
		return "1 = 0", nil, nil
	}
	in, teams := store.In(st.teamIDs)
	return `p.id IN (SELECT project_id FROM team_projects WHERE team_id IN (` + in + `))`, teams, nil
}

// VariableReach is where the caller may read variables in an organization
// (VariableRead) and whose project-owned variable sets it may read: what
// the variable domain selects the readable variable sets by, in SQL.
type VariableReach struct {
	// All: the variables of every workspace (and so every variable set).
	All bool
	// Workspaces whose variables a team grant lets the caller read, and
	// the projects those workspaces are in.
	Workspaces, WorkspaceProjects []string
	// Projects whose grants let the caller read the variables of every
	// workspace in them.
	Projects []string
	// VarsetProjects are projects whose own variable sets the caller may
	// read (project access variable-sets read or write).
	VarsetProjects []string
}

// Any reports whether the caller may read the variables of some workspace
// (where a global variable set applies).
func (r VariableReach) Any() bool {
	return r.All || len(r.Workspaces) > 0 || len(r.Projects) > 0
}

// ReadableVariables says where the caller in ctx may read variables in org,
// decided as workspace() decides VariableRead: the organization's access
// (owners, organization tokens, manage-workspaces, manage-projects and
// read-workspaces read every workspace's variables), else the caller's
// teams' grants on workspaces and projects. Without a model in ctx, only
// owners reach anything (Allows' answer).
func ReadableVariables(ctx context.Context, org string) (VariableReach, error) {
	p := auth.FromContext(ctx)
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		return VariableReach{All: p.IsOwner(org)}, nil
	}
	st, err := s.standing(ctx, p, org)
	if err != nil {
		return VariableReach{}, err
	}
	switch {
	case st.run, !st.member:
		// Run tokens read their workspace's variables through the job
		// protocol, never through the API (VariableRead refuses them).
		return VariableReach{}, nil
	case st.owner, st.orgToken, st.access.ManageWorkspaces, st.access.ManageProjects, st.access.ReadWorkspaces:
		return VariableReach{All: true}, nil
	}
	grants, err := s.teamGrants(ctx, st)
	if err != nil {
		return VariableReach{}, err
	}
	var r VariableReach
	seen := map[string]bool{}
	for _, g := range grants {
		if g.project != "" {
			if g.onWorkspaces.Variables >= VarsRead {
				r.Projects = append(r.Projects, g.project)
			}
			if g.onProject.VariableSets >= VarsRead {
				r.VarsetProjects = append(r.VarsetProjects, g.project)
			}
			continue
		}
		if g.onWorkspaces.Variables < VarsRead || seen[g.workspace] {
			continue
		}
		seen[g.workspace] = true
		res, err := s.resolver.Resolve(ctx, g.workspace)
		if core.KindOf(err) == core.KindNotFound {
			continue
		}
		if err != nil {
			return VariableReach{}, err
		}
		r.Workspaces = append(r.Workspaces, g.workspace)
		if res.ProjectID != "" {
			r.WorkspaceProjects = append(r.WorkspaceProjects, res.ProjectID)
		}
	}
	return r, nil
}
