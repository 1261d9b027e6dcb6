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

// Allows asks the model in ctx whether the caller in ctx may do action on
// res: nil, or a core.Forbidden / core.NotFound error. Services call it for
// their decisions. Without a model in ctx (a service used on its own, as
// in its package tests) only owners are allowed, the strictest answer.
func Allows(ctx context.Context, action Action, res Resource) error {
	s, _ := ctx.Value(modelKey{}).(*Service)
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

// AllowsTeam is Allows for a team action on a team the caller's request
// already read (t), which the model does not read again. Without a model
// in ctx only owners are allowed.
func AllowsTeam(ctx context.Context, action Action, t Team) error {
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		if auth.FromContext(ctx).IsOwner(t.Organization) {
			return nil
		}
		return core.Forbidden("only owners of organization %q may do this", t.Organization)
	}
	return s.DecideTeam(ctx, auth.FromContext(ctx), action, t)
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
	case st.owner, st.orgToken, st.access.ManageWorkspaces, st.access.ManageProjects, st.access.ReadWorkspaces:
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
