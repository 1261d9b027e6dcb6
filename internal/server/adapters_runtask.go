package server

import (
	"context"

	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/workspace"
)

// runTaskWorkspaces shows the run task domain the workspaces tasks attach
// to.
type runTaskWorkspaces struct{ ws *workspace.Service }

func (a runTaskWorkspaces) Organization(ctx context.Context, id string) (string, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return w.Organization, nil
}

// runTaskRuns shows the run task domain the runs it gates.
type runTaskRuns struct{ s *Server }

func (a runTaskRuns) RunInfo(ctx context.Context, runID string) (runtask.RunInfo, error) {
	r, err := a.s.Runs.Get(system(ctx), runID)
	if err != nil {
		return runtask.RunInfo{}, err
	}
	w, err := a.s.Workspaces.System(ctx, r.WorkspaceID)
	if err != nil {
		return runtask.RunInfo{}, err
	}
	by := r.CreatedBy
	if core.HasPrefix(by, core.PrefixUser) {
		if u, err := a.s.Auth.GetUser(ctx, by); err == nil {
			by = u.Username
		}
	}
	info := runtask.RunInfo{ID: r.ID, Message: r.Message, CreatedBy: by, ConfigVersionID: r.ConfigurationVersionID, PlanID: r.Plan.ID,
		CreatedAt: r.CreatedAt, Speculative: r.PlanOnly, WorkspaceID: w.ID, WorkspaceName: w.Name, WorkingDirectory: w.Settings.WorkingDirectory,
		Organization: r.Organization}
	// A run of a commit names its repository, branch, commit and pull
	// request (the configuration version's ingress attributes).
	if cv, err := configversion.Lookup(ctx, a.s.DB, r.ConfigurationVersionID); err == nil && cv.Ingress != nil {
		in := cv.Ingress
		info.VCSRepoURL, info.VCSBranch, info.VCSCommitURL, info.VCSPullRequestURL = in.CloneURL, in.Branch, in.CommitURL, in.PullRequestURL
	}
	return info, nil
}

func (a runTaskRuns) StageDone(ctx context.Context, runID string, stage run.TaskStage, outcome run.StageOutcome, msg string) error {
	return a.s.Runs.StageDone(ctx, runID, stage, outcome, msg)
}

func (a runTaskRuns) WaitsAtStage(ctx context.Context, runID string, stage run.TaskStage) (bool, error) {
	return a.s.Runs.WaitsAtStage(ctx, runID, stage)
}

// wireRunTasks builds the run task service and puts its stages into the
// run lifecycle.
func (s *Server) wireRunTasks() error {
	var err error
	s.RunTasks, err = runtask.NewService(runtask.Options{
		DB: s.DB, Workspaces: runTaskWorkspaces{s.Workspaces}, AgentPools: s.AgentPools, Runs: runTaskRuns{s}, Tokens: s.Auth,
		Logger: s.logger.With("component", "runtask"), BaseURL: s.BaseURL, Keys: s.Keys, Forwards: s.Forwards,
		ProgressTimeout: s.cfg.RunTaskProgressTimeout, TotalTimeout: s.cfg.RunTaskTimeout, Backoff: s.cfg.RunTaskRetryBackoff,
	})
	if err != nil {
		return err
	}
	s.Runs.Stages = s.RunTasks // also run.StageIDsSQL: a run read reads its stage IDs with it
	s.Runs.Observe(s.RunTasks.RunTransition)
	s.Auth.SetTaskResultResolver(s.RunTasks)
	return nil
}

// The run read asks for a run's task stage IDs in its one statement.
var _ run.StageIDsSQL = (*runtask.Service)(nil)
