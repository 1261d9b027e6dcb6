package authz

import (
	"context"
	"slices"

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

// ReadableWorkspaces returns a test of which of org's workspaces the caller
// in ctx may see, computed once for a whole list (HCP Terraform lists only
// those). Without a model in ctx everything the organization check let
// through is visible.
func ReadableWorkspaces(ctx context.Context, org string) (func(projectID, workspaceID string) bool, error) {
	all := func(string, string) bool { return true }
	s, _ := ctx.Value(modelKey{}).(*Service)
	if s == nil {
		return all, nil
	}
	p := auth.FromContext(ctx)
	st, err := s.standing(ctx, p, org)
	if err != nil {
		return nil, err
	}
	switch {
	case st.run:
		return func(_, id string) bool {
			w, err := s.workspace(ctx, p, st, Resource{Organization: org, WorkspaceID: id})
			return err == nil && w.Read
		}, nil
	case !st.member:
		return func(string, string) bool { return false }, nil
	case st.owner, st.orgToken, st.access.ManageWorkspaces, st.access.ManageProjects, st.access.ReadWorkspaces:
		return all, nil
	case len(st.teamIDs) == 0:
		return func(string, string) bool { return false }, nil
	}
	var args []any
	in := placeholders(st.teamIDs, &args)
	id := func(sc interface{ Scan(...any) error }) (string, error) {
		var v string
		return v, sc.Scan(&v)
	}
	wsIDs, err := store.All(ctx, s.db, id, `SELECT workspace_id FROM team_workspaces WHERE team_id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	prjIDs, err := store.All(ctx, s.db, id, `SELECT project_id FROM team_projects WHERE team_id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	return func(projectID, workspaceID string) bool {
		return slices.Contains(wsIDs, workspaceID) || slices.Contains(prjIDs, projectID)
	}, nil
}
