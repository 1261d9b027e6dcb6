package server

import (
	"context"

	"github.com/terracehq/terrace/internal/assessment"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/workspace"
)

// assessmentWorkspaces shows workspaces to the assessment domain:
// assessments are enabled by the workspace's assessments-enabled or its
// organization's assessments-enforced.
type assessmentWorkspaces struct {
	ws   *workspace.Service
	orgs *organization.Service
}

func (a assessmentWorkspaces) convert(ctx context.Context, w *workspace.Workspace, enforced map[string]bool) *assessment.Workspace {
	on, ok := enforced[w.Organization]
	if !ok {
		sys := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
		if o, err := a.orgs.Get(sys, w.Organization); err == nil {
			on = o.Settings.AssessmentsEnforced
		}
		enforced[w.Organization] = on
	}
	return &assessment.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization, ProjectID: w.ProjectID,
		Enabled: w.Settings.AssessmentsEnabled || on}
}

func (a assessmentWorkspaces) Get(ctx context.Context, id string) (*assessment.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.convert(ctx, w, map[string]bool{}), nil
}

func (a assessmentWorkspaces) System(ctx context.Context, id string) (*assessment.Workspace, error) {
	w, err := a.ws.System(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.convert(ctx, w, map[string]bool{}), nil
}

func (a assessmentWorkspaces) Enabled(ctx context.Context) ([]*assessment.Workspace, error) {
	all, err := a.ws.AllSystem(ctx)
	if err != nil {
		return nil, err
	}
	enforced := map[string]bool{}
	var out []*assessment.Workspace
	for _, w := range all {
		if aw := a.convert(ctx, w, enforced); aw.Enabled {
			out = append(out, aw)
		}
	}
	return out, nil
}

// wireAssessments builds the health assessment service and subscribes it
// to runs.
func (s *Server) wireAssessments() error {
	var err error
	s.Assessments, err = assessment.NewService(assessment.Options{
		DB: s.DB, Workspaces: assessmentWorkspaces{s.Workspaces, s.Orgs}, Runs: s.Runs, Notify: s.Notify,
		Logger: s.logger.With("component", "assessment"), Interval: s.cfg.AssessmentInterval,
	})
	if err != nil {
		return err
	}
	s.Runs.Observe(s.Assessments.RunTransition)
	s.Workspaces.OnDelete = append(s.Workspaces.OnDelete, assessment.DeleteWorkspace)
	return nil
}

// startAssessments starts the assessment runner on ctx (the scheduler is a
// leader loop, see cluster.go); stop ends and waits for it. It must start after
// startRunner, whose start-up recovery takes back the jobs of this data
// dir's earlier runners (assessment runners included).
func (s *Server) startAssessments(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	id := "inproc-" + s.instanceID() + "-assess-" + core.RandomString(8)
	// The assessment runner is the in-process runner claiming from the
	// assessment queue only.
	r := runner.New(s.inProcessJobs(id, run.QueueAssessments), runner.Config{
		ID: id, Concurrency: s.cfg.AssessmentConcurrency, Engines: s.engines, ScratchDir: s.cfg.ScratchDir,
		CLIConfig: s.cfg.RunCLIConfig, PluginCacheDir: s.cfg.PluginCacheDir,
		Logger: s.logger.With("component", "assessment-runner"), CancelGrace: s.cfg.CancelGrace,
	})
	r.Start(ctx)
	return func() {
		cancel()
		r.Stop()
	}
}
