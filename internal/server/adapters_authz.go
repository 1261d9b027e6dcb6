package server

import (
	"context"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/team"
)

// authzTeams gives the authorization model the teams a caller acts as.
type authzTeams struct{ teams *team.Service }

func (a authzTeams) UserTeams(ctx context.Context, userID, org string) ([]authz.Team, error) {
	ts, err := a.teams.MemberTeams(ctx, userID, org)
	if err != nil {
		return nil, err
	}
	out := make([]authz.Team, len(ts))
	for i, t := range ts {
		out[i] = t.Authz()
	}
	return out, nil
}

func (a authzTeams) Team(ctx context.Context, id string) (authz.Team, error) {
	return a.teams.AuthzTeam(ctx, id)
}

// authzResolver tells the model where a resource lives, asking each domain
// as the system.
type authzResolver struct{ s *Server }

func system(ctx context.Context) context.Context {
	return auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
}

func (a authzResolver) workspace(ctx context.Context, id string) (authz.Resource, error) {
	w, err := a.s.Workspaces.System(ctx, id)
	if err != nil {
		return authz.Resource{}, err
	}
	return authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID}, nil
}

func (a authzResolver) Resolve(ctx context.Context, id string) (authz.Resource, error) {
	sys := system(ctx)
	switch {
	case core.HasPrefix(id, core.PrefixWorkspace):
		return a.workspace(ctx, id)
	case core.HasPrefix(id, core.PrefixRun):
		r, err := a.s.Runs.Get(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		if project, ok := r.WorkspaceProject(); ok {
			// The run's read took its workspace's project along.
			return authz.Resource{Organization: r.Organization, ProjectID: project, WorkspaceID: r.WorkspaceID, RunID: r.ID}, nil
		}
		res, err := a.workspace(ctx, r.WorkspaceID)
		res.RunID = r.ID
		return res, err
	case core.HasPrefix(id, core.PrefixPlan), core.HasPrefix(id, core.PrefixApply):
		r, err := a.s.Runs.GetByPhase(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		if project, ok := r.WorkspaceProject(); ok {
			return authz.Resource{Organization: r.Organization, ProjectID: project, WorkspaceID: r.WorkspaceID, RunID: r.ID}, nil
		}
		res, err := a.workspace(ctx, r.WorkspaceID)
		res.RunID = r.ID
		return res, err
	case core.HasPrefix(id, core.PrefixStateVersion):
		v, err := a.s.States.Get(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		return a.workspace(ctx, v.WorkspaceID)
	case core.HasPrefix(id, core.PrefixStateOutput):
		o, err := a.s.States.Output(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		return a.Resolve(ctx, o.StateVersionID)
	case core.HasPrefix(id, core.PrefixConfigVersion):
		cv, err := a.s.ConfigVersions.Get(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		res, err := a.workspace(ctx, cv.WorkspaceID)
		res.ConfigVersionID = cv.ID
		return res, err
	case core.HasPrefix(id, core.PrefixProject):
		p, err := a.s.Projects.Get(sys, id)
		if err != nil {
			return authz.Resource{}, err
		}
		return authz.Resource{Organization: p.Organization, ProjectID: p.ID}, nil
	case core.HasPrefix(id, stack.PrefixStack), core.HasPrefix(id, stack.PrefixConfiguration), core.HasPrefix(id, stack.PrefixGroup),
		core.HasPrefix(id, stack.PrefixDiagnostic), core.HasPrefix(id, stack.PrefixRun), core.HasPrefix(id, stack.PrefixStep):
		org, prj, err := a.s.Stacks.Locate(ctx, id)
		if err != nil {
			return authz.Resource{}, err
		}
		return authz.Resource{Organization: org, ProjectID: prj}, nil
	case core.HasPrefix(id, core.PrefixTeam):
		org, err := a.s.Teams.TeamOrganization(ctx, id)
		if err != nil {
			return authz.Resource{}, err
		}
		return authz.Resource{Organization: org, TeamID: id}, nil
	}
	return authz.Resource{}, core.NotFound("%q not found", id)
}

func (a authzResolver) WorkspaceByName(ctx context.Context, org, name string) (authz.Resource, error) {
	w, err := a.s.Workspaces.GetByName(system(ctx), org, name)
	if err != nil {
		return authz.Resource{}, err
	}
	return authz.Resource{Organization: w.Organization, ProjectID: w.ProjectID, WorkspaceID: w.ID}, nil
}

func (a authzResolver) SharesState(ctx context.Context, target, reader string) (bool, error) {
	return a.s.Workspaces.CanReadStateOf(ctx, reader, target)
}

func (a authzResolver) SharesModules(ctx context.Context, org string, readers []string) (bool, error) {
	return a.s.Orgs.SharesModules(ctx, org, readers)
}

func (a authzResolver) SharesProviders(ctx context.Context, org string, readers []string) (bool, error) {
	return a.s.Orgs.SharesProviders(ctx, org, readers)
}

// ManagedBy reads the workspace's mark, which is set when the workspace
// is created and never changes (workspace.Options.ManagedBy), so each
// replica remembers it: a decision on a workspace of its own costs no
// statement after the first. For a marked one it asks whether the stack
// still exists: the workspaces a deleted stack kept (they still manage
// resources) are people's again.
func (a authzResolver) ManagedBy(ctx context.Context, workspaceID string) (string, error) {
	stack, ok := a.s.managedBy.Get(workspaceID)
	if !ok {
		w, err := a.s.Workspaces.System(ctx, workspaceID)
		if core.KindOf(err) == core.KindNotFound {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		stack = w.Settings.ManagedBy
		a.s.managedBy.Put(workspaceID, stack)
	}
	if stack == "" {
		return "", nil
	}
	if _, err := a.s.Stacks.SystemStack(ctx, stack); core.KindOf(err) == core.KindNotFound {
		return "", nil
	} else if err != nil {
		return "", err
	}
	return stack, nil
}

func (a authzResolver) OrganizationExists(ctx context.Context, name string) error {
	_, err := a.s.Orgs.Get(system(ctx), name)
	return err
}

// AllowsForceDelete reads the organization's setting once per request
// (the request memo): a workspace list tells can-force-delete for each
// workspace from one read.
func (a authzResolver) AllowsForceDelete(ctx context.Context, org string) (bool, error) {
	return core.Memoize(ctx, "allow-force-delete:"+org, func() (bool, error) {
		o, err := a.s.Orgs.Get(system(ctx), org)
		if err != nil {
			return false, err
		}
		return o.Settings.AllowForceDeleteWorkspaces, nil
	})
}
