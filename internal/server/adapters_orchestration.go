package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestration"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/workspace"
)

// wireOrchestration builds the orchestrator service: an environment is
// backed by a workspace, a deployment is a configuration version plus a
// run, and outputs come from the workspace's current state.
func (s *Server) wireOrchestration() {
	s.Orchestration = orchestration.NewService(s.DB)
	s.Orchestration.Logger = s.logger.With("component", "orchestration")
	s.Orchestration.Orgs = orchOrgs{s}
	s.Orchestration.Workspaces = orchWorkspaces{s.Workspaces, s.Projects}
	s.Orchestration.Configs = orchConfigs{s.ConfigVersions}
	s.Orchestration.Runs = orchRuns{s.Runs}
	s.Orchestration.Outputs = orchOutputs{s}
}

// orchestrationHandler serves /api/terrace/v1 behind the token middleware.
func (s *Server) orchestrationHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		orchestration.Error(w, r, core.NotFound("no such endpoint: %s %s", r.Method, r.URL.Path))
	})
	(&orchestration.API{Service: s.Orchestration}).Register(mux)
	// The authorization model in the context answers the service's
	// authz.Allows questions (every orchestrator decision).
	return s.Auth.Middleware(orchestration.Error)(s.Audit.RecorderFor(mux, s.withModel(mux), orchestration.Error))
}

type orchWorkspaces struct {
	ws       *workspace.Service
	projects *project.Service
}

// Project: environments' workspaces go into the default project.
func (a orchWorkspaces) Project(ctx context.Context, org string) (string, error) {
	return a.projects.DefaultID(ctx, org)
}

func (a orchWorkspaces) CheckCreate(ctx context.Context, org, prj string) error {
	return a.ws.CheckCreate(ctx, org, prj)
}

func (a orchWorkspaces) Create(ctx context.Context, org, prj, name string) (string, error) {
	w, err := a.ws.Create(ctx, org, workspace.Options{Name: &name, ProjectID: &prj, ExecutionMode: ptr("remote"), AutoApply: ptr(true),
		Description: ptr("Environment of the resource-graph orchestrator; changed by deployments.")})
	if err != nil {
		return "", err
	}
	return w.ID, nil
}

func (a orchWorkspaces) Delete(ctx context.Context, id string) error { return a.ws.SafeDelete(ctx, id) }

type orchConfigs struct{ cv *configversion.Service }

func (a orchConfigs) CreateFromArchive(ctx context.Context, workspaceID string, tgz []byte, speculative bool) (string, error) {
	cv, err := a.cv.CreateFromArchive(ctx, workspaceID, tgz, configversion.CreateOptions{AutoQueueRuns: ptr(false), Speculative: ptr(speculative)})
	if err != nil {
		return "", err
	}
	return cv.ID, nil
}

type orchRuns struct{ runs *run.Service }

func (a orchRuns) Create(ctx context.Context, workspaceID, cvID string, planOnly, destroy bool) (string, error) {
	o := run.CreateOptions{WorkspaceID: workspaceID, ConfigurationVersionID: cvID, AutoApply: ptr(!planOnly),
		PlanOnly: ptr(planOnly), IsDestroy: ptr(destroy), Message: ptr("Deployment by the resource-graph orchestrator")}
	r, err := a.runs.Create(ctx, o)
	if err != nil {
		return "", err
	}
	return r.ID, nil
}

func (a orchRuns) Status(ctx context.Context, runID string) (string, bool, bool, error) {
	r, err := a.runs.Get(ctx, runID)
	if err != nil {
		return "", false, false, err
	}
	ok := r.Status == run.Applied || r.Status == run.PlannedAndFinished
	return string(r.Status), r.Status.Final(), ok, nil
}

type orchOutputs struct{ s *Server }

func (a orchOutputs) Current(ctx context.Context, workspaceID string) (map[string]json.RawMessage, error) {
	outs, err := a.s.States.CurrentOutputs(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	m := map[string]json.RawMessage{}
	for _, o := range outs {
		m[o.Name] = o.Value
	}
	return m, nil
}

type orchOrgs struct{ s *Server }

func (a orchOrgs) Exists(ctx context.Context, name string) error {
	_, err := a.s.Orgs.Get(ctx, name)
	return err
}
