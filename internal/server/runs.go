package server

import (
	"context"
	"fmt"
	"github.com/terracehq/terrace/internal/runtask"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/user"
	"github.com/terracehq/terrace/internal/workspace"
)

// runWorkspaces shows workspaces to the run domain.
type runWorkspaces struct {
	db    *store.DB
	ws    *workspace.Service
	pools *agent.Service // names the agent pool of agent-mode workspaces (nil: left out)
}

// convert reads what runs need beyond the workspace row (its effective
// execution mode and agent pool) through q: inside a transaction, its Tx.
func (a runWorkspaces) convert(ctx context.Context, q store.Q, w *workspace.Workspace) *run.Workspace {
	mode, poolID := a.ws.EffectiveExecutionIn(ctx, q, w)
	pool := ""
	if poolID != "" && a.pools != nil {
		pool = a.pools.PoolName(ctx, q, poolID)
		// A pool that does not serve the workspace (not allowed, or
		// excluded) never gets its jobs: they wait for the NoPool agents,
		// which do not exist, and the run's event says why.
		if ok, err := a.pools.Serves(ctx, q, poolID, w.ID, w.ProjectID); err == nil && !ok {
			poolID, pool = run.NoPool, pool+" (which does not serve this workspace: add it to the pool's allowed workspaces or projects)"
		}
	}
	return &run.Workspace{
		AgentPool: pool, AgentPoolID: poolID,
		ID: w.ID, Name: w.Name, Organization: w.Organization, ProjectID: w.ProjectID,
		TerraformVersion: w.Settings.TerraformVersion, WorkingDirectory: w.Settings.WorkingDirectory,
		ExecutionMode: mode, AutoApply: w.Settings.AutoApply, StructuredRunOutput: w.Settings.StructuredRunOutputEnabled,
	}
}

func (a runWorkspaces) Get(ctx context.Context, id string) (*run.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.convert(ctx, a.db, w), nil
}

func (a runWorkspaces) System(ctx context.Context, id string) (*run.Workspace, error) {
	return a.SystemIn(ctx, a.db, id)
}

func (a runWorkspaces) SystemIn(ctx context.Context, q store.Q, id string) (*run.Workspace, error) {
	w, err := a.ws.SystemIn(ctx, q, id)
	if err != nil {
		return nil, err
	}
	return a.convert(ctx, q, w), nil
}

func (a runWorkspaces) Identity(ctx context.Context, id string) (*run.Workspace, error) {
	return identityOf(a.ws.System(ctx, id))
}

func (a runWorkspaces) Readable(ctx context.Context, id string) (*run.Workspace, error) {
	return identityOf(a.ws.Get(ctx, id))
}

// identityOf is a workspace's identity for the run domain (Identity).
func identityOf(w *workspace.Workspace, err error) (*run.Workspace, error) {
	if err != nil {
		return nil, err
	}
	return &run.Workspace{
		ID: w.ID, Name: w.Name, Organization: w.Organization, ProjectID: w.ProjectID,
		TerraformVersion: w.Settings.TerraformVersion, WorkingDirectory: w.Settings.WorkingDirectory,
		AutoApply: w.Settings.AutoApply, StructuredRunOutput: w.Settings.StructuredRunOutputEnabled,
	}, nil
}

func (a runWorkspaces) ReadableSQL(ctx context.Context, org string) (string, []any, func(string) bool, error) {
	return a.ws.ReadableSQL(ctx, org, "runs.workspace_id")
}

// WorkspaceNameLikeSQL says which runs' workspaces have a name like a
// pattern, for an admin's run search (run.WorkspaceNameSQL).
func (a runWorkspaces) WorkspaceNameLikeSQL() string {
	return workspace.NameLikeSQL("runs.workspace_id")
}

// RunWorkspaceProjectSQL says a run's workspace's project in SQL for the
// run read (run.WorkspaceProjectSQL).
func (a runWorkspaces) RunWorkspaceProjectSQL() string {
	return workspace.ProjectIDSQL("runs.workspace_id")
}

func (a runWorkspaces) LockForRun(ctx context.Context, q store.Q, wsID, runID string) (bool, error) {
	return a.ws.LockForRun(ctx, q, wsID, runID)
}

func (a runWorkspaces) LockQueue(ctx context.Context, q store.Q, wsID string) error {
	return a.ws.LockQueue(ctx, q, wsID)
}

func (a runWorkspaces) UnlockForRunSQL(wsID, runID string) (string, []any) {
	return workspace.UnlockForRunSQL(wsID, runID)
}

// runConfigs shows configuration versions to the run domain.
type runConfigs struct{ db *store.DB }

func (a runConfigs) Get(ctx context.Context, id string) (*run.ConfigVersion, error) {
	cv, err := configversion.Lookup(ctx, a.db, id)
	if err != nil {
		return nil, err
	}
	return &run.ConfigVersion{ID: cv.ID, WorkspaceID: cv.WorkspaceID, Status: string(cv.Status), Speculative: cv.Speculative}, nil
}

func (a runConfigs) Latest(ctx context.Context, workspaceID string) (*run.ConfigVersion, error) {
	id, err := configversion.CurrentID(ctx, a.db, workspaceID)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, core.NotFound("workspace %s has no configuration version", workspaceID)
	}
	return a.Get(ctx, id)
}

// wireRuns builds the run service and connects it to the other domains.
func (s *Server) wireRuns() {
	s.Runs = run.NewService(run.Options{
		DB: s.DB, Blobs: s.Blobs, Signer: s.Signer, Logger: s.logger.With("component", "runs"),
		Workspaces: runWorkspaces{s.DB, s.Workspaces, s.AgentPools}, Configs: runConfigs{s.DB}, LeaseTTL: s.cfg.JobHeartbeatTimeout, Keys: s.Keys,
		ClosedOrganizationsSQL: s.Orgs.DisabledOrganizationsSQL(),
	})
	s.Orgs.OnEnable = append(s.Orgs.OnEnable, func(context.Context, string) { s.Runs.Resume() })
	s.Auth.SetRunResolver(s.Runs)
	s.Workspaces.Runs = s.Runs
	s.Workspaces.OnUnlock = append(s.Workspaces.OnUnlock, func(ctx context.Context, id string) {
		if err := s.Runs.Schedule(ctx, id); err != nil {
			s.logger.Error("starting the next run after an unlock", "workspace", id, "error", err)
		}
	})
	s.Workspaces.OnDelete = append(s.Workspaces.OnDelete, run.DeleteWorkspaceRuns)
	s.ConfigVersions.SetUploadHook(s.queueUploadedRun)
	s.ConfigVersions.SetInUse(func(ctx context.Context, cv *configversion.ConfigurationVersion) (bool, error) {
		return s.Runs.UsesConfigVersion(ctx, cv.ID, false)
	})
	s.ConfigVersions.SetArchiveCheck(func(ctx context.Context, cv *configversion.ConfigurationVersion) error {
		active, err := s.Runs.UsesConfigVersion(ctx, cv.ID, true)
		if err != nil {
			return err
		}
		if active {
			return core.Conflict("configuration version %s is used by an active run", cv.ID)
		}
		return nil
	})
	s.Runs.OnChange(func(ctx context.Context, r *run.Run) {
		if r.Status == run.Applied {
			// A provisional configuration becomes current once applied.
			if err := configversion.Promote(ctx, s.DB, r.ConfigurationVersionID); err != nil {
				s.logger.Warn("promoting a configuration version", "configuration_version", r.ConfigurationVersionID, "error", err)
			}
		}
	})
}

func ptr[T any](v T) *T { return &v }

// queueUploadedRun queues the run of a configuration version uploaded with
// auto-queue-runs, as HCP Terraform does: created, checked and attributed
// as whoever created the version (the upload itself carries no token, and
// its capability URL no model: the run service asks this one). A refusal
// comes back to the configuration version domain, which records it on
// the version.
func (s *Server) queueUploadedRun(ctx context.Context, cv *configversion.ConfigurationVersion) error {
	if cv.CreatedByToken == "" {
		return core.Forbidden("configuration version %s has no creator to queue its run as", cv.ID)
	}
	p, err := s.Auth.PrincipalOfToken(ctx, cv.CreatedByToken)
	if err != nil {
		return fmt.Errorf("the token that created configuration version %s: %w", cv.ID, err)
	}
	_, err = s.Runs.Create(authz.WithModel(auth.WithPrincipal(ctx, p), s.Authz), run.CreateOptions{WorkspaceID: cv.WorkspaceID, ConfigurationVersionID: cv.ID,
		Source: "tfe-configuration-version"})
	return err
}

// runAPI registers the run routes.
func (s *Server) runAPI(api, capability *http.ServeMux, wsAPI *workspace.API) {
	taskAPI := &runtask.API{Service: s.RunTasks}
	runAPI := &run.API{
		Service:            s.Runs,
		TaskStages:         taskAPI.RunStages,
		PrefetchTaskStages: taskAPI.PrefetchRunStages,
		IncludeWorkspace: func(r *http.Request, id string) (any, error) {
			w, err := s.Workspaces.Get(r.Context(), id)
			if err != nil {
				return nil, err
			}
			return wsAPI.Render(r, w), nil
		},
		IncludeConfigVersion: func(r *http.Request, id string) (any, error) {
			cv, err := s.ConfigVersions.Get(r.Context(), id)
			if err != nil {
				return nil, err
			}
			return configversion.Render(cv), nil
		},
		IncludeUser: func(r *http.Request, id string) (any, error) {
			u, err := s.Auth.GetUser(r.Context(), id)
			if err != nil {
				return nil, err
			}
			return user.ToJSON(u, false), nil
		},
		UserByName: func(r *http.Request, name string) (string, error) {
			u, err := s.Auth.UserByName(r.Context(), name)
			if err != nil {
				return "", err
			}
			return u.ID, nil
		},
	}
	runAPI.AdminWorkspaces = wsAPI.AdminIncluded
	runAPI.Register(api, capability)
	wsAPI.IncludeRun = runAPI.Render
	wsAPI.IncludeConfigVersion = runAPI.IncludeConfigVersion
}

// startRunner starts the in-process runner. It first takes back the jobs of this server's earlier processes: in-process
// runner IDs are "inproc-<instance>-<random>", the instance being this data
// dir's, so that a replica starting on the same database leaves the jobs
// other replicas are running alone (those are recovered when their leases
// expire, if ever).
func (s *Server) startRunner(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	prefix := "inproc-" + s.instanceID() + "-"
	id := prefix + core.RandomString(10)
	r := runner.New(s.Metrics.CountClaims(s.inProcessJobs(id, "")), runner.Config{
		ID: id, Concurrency: s.cfg.RunnerConcurrency, Engines: s.engines, ScratchDir: s.cfg.ScratchDir,
		CLIConfig: s.cfg.RunCLIConfig, PluginCacheDir: s.cfg.PluginCacheDir,
		Logger: s.logger.With("component", "runner"), CancelGrace: s.cfg.CancelGrace,
	})
	if n, err := s.Runs.ReapExpired(ctx, prefix, id); err != nil {
		s.logger.Error("recovering jobs of an earlier process", "error", err)
	} else if n > 0 {
		s.logger.Warn("recovered jobs left by an earlier server process", "jobs", n)
	}
	if n, err := r.RemoveScratch(prefix); err != nil {
		s.logger.Warn("removing the job folders of an earlier process", "error", err)
	} else if n > 0 {
		s.logger.Info("removed job folders left by an earlier server process", "folders", n)
	}
	r.Start(ctx)
	// Jobs whose leases expired are reaped by the cluster's leader
	// (reapExpiredJobs in cluster.go).
	return func() {
		cancel()
		r.Stop()
	}
}

// instanceID identifies this server's data dir across restarts (kept in
// <data-dir>/instance-id). Replicas have their own data dirs.
func (s *Server) instanceID() string {
	path := filepath.Join(s.cfg.DataDir, "instance-id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 8 {
		return strings.TrimSpace(string(b))
	}
	id := core.RandomString(8)
	if err := core.WriteFileAtomic(path, []byte(id+"\n"), 0o600); err != nil {
		// Without a stable ID the jobs of earlier processes are still
		// recovered, when their leases expire.
		s.logger.Warn("writing the instance ID", "error", err)
	}
	return id
}
