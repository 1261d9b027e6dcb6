package server

import (
	"context"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/policy"
	"github.com/terracehq/terrace/internal/store"
)

// policyWorkspaces shows the policy domain the workspaces and projects
// policy sets apply to.
type policyWorkspaces struct{ s *Server }

func (a policyWorkspaces) Organization(ctx context.Context, id string) (string, error) {
	w, err := a.s.Workspaces.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return w.Organization, nil
}

func (a policyWorkspaces) ProjectOrganization(ctx context.Context, id string) (string, error) {
	p, err := a.s.Projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}

func (a policyWorkspaces) ProjectOf(ctx context.Context, q store.Q, id string) (string, error) {
	w, err := a.s.Workspaces.SystemIn(ctx, q, id)
	if err != nil {
		return "", err
	}
	return w.ProjectID, nil
}

func (a policyWorkspaces) Tags(ctx context.Context, q store.Q, id string) ([]policy.Tag, error) {
	bs, err := a.s.Workspaces.SystemEffectiveTagBindingsIn(ctx, q, id)
	if err != nil {
		return nil, err
	}
	out := make([]policy.Tag, len(bs))
	for i, b := range bs {
		out[i] = policy.Tag{Key: b.Key, Value: b.Value}
	}
	return out, nil
}

// policyRuns shows the policy domain the plan and run it evaluates.
type policyRuns struct{ s *Server }

func (a policyRuns) PlanJSON(ctx context.Context, runID string) ([]byte, error) {
	r, err := a.s.Runs.Get(system(ctx), runID)
	if err != nil {
		return nil, err
	}
	return a.s.Runs.PlanBlob(ctx, r.Plan.ID, "json")
}

func (a policyRuns) Input(ctx context.Context, runID string) (map[string]any, map[string]any, error) {
	r, err := a.s.Runs.Get(system(ctx), runID)
	if err != nil {
		return nil, nil, err
	}
	info, err := runTaskRuns(a).RunInfo(ctx, runID)
	if err != nil {
		return nil, nil, err
	}
	w, err := a.s.Workspaces.System(ctx, r.WorkspaceID)
	if err != nil {
		return nil, nil, err
	}
	run := map[string]any{
		"id": r.ID, "created_at": r.CreatedAt.UTC().Format(time.RFC3339), "created_by": info.CreatedBy, "message": r.Message,
		"is_destroy": r.IsDestroy, "refresh": r.Refresh, "refresh_only": r.RefreshOnly, "speculative": r.PlanOnly,
		"target_addrs": r.TargetAddrs, "replace_addrs": r.ReplaceAddrs, "source": r.Source,
		"organization": map[string]any{"name": r.Organization},
		"project":      map[string]any{"id": w.ProjectID},
	}
	ws := map[string]any{
		"id": w.ID, "name": w.Name, "description": w.Settings.Description, "auto_apply": w.Settings.AutoApply,
		"working_directory": w.Settings.WorkingDirectory, "terraform_version": w.Settings.TerraformVersion,
		"execution_mode": w.Settings.ExecutionMode, "created_at": w.CreatedAt.UTC().Format(time.RFC3339),
	}
	return run, ws, nil
}

// wirePolicies builds the policy service and gives the run task domain's
// post-plan stages its evaluations.
func (s *Server) wirePolicies() error {
	var err error
	s.Policies, err = policy.NewService(policy.Options{DB: s.DB, Workspaces: policyWorkspaces{s}, Runs: policyRuns{s}, Signer: s.Signer,
		Keys: s.Keys, Logger: s.logger.With("component", "policy")})
	if err != nil {
		return err
	}
	s.RunTasks.SetPolicies(s.Policies)
	return nil
}

// policyAPI registers the policy routes, with the workspace include and
// the task stage check they borrow from other domains.
func (s *Server) policyAPI(api, capability *http.ServeMux, renderWorkspace func(*http.Request, string) (any, error)) {
	a := &policy.API{Service: s.Policies, IncludeWorkspace: renderWorkspace,
		StageReadable: func(r *http.Request, id string) error {
			_, _, err := s.RunTasks.Stage(r.Context(), id)
			return err
		}}
	a.Register(api)
	a.RegisterCapability(capability)
}
