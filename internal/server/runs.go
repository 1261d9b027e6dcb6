package server

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/terracehq/terrace/internal/runtask"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/user"
	"github.com/terracehq/terrace/internal/workspace"
)

// runWorkspaces shows workspaces to the run domain.
type runWorkspaces struct {
	ws    *workspace.Service
	pools *agent.Service // names the agent pool of agent-mode workspaces (nil: left out)
}

func (a runWorkspaces) convert(ctx context.Context, w *workspace.Workspace) *run.Workspace {
	mode, poolID := a.ws.EffectiveExecution(ctx, w)
	pool := ""
	if poolID != "" && a.pools != nil {
		if p, err := a.pools.Get(ctx, poolID); err == nil {
			pool = p.Name
		}
	}
	return &run.Workspace{
		AgentPool: pool,
		ID:        w.ID, Name: w.Name, Organization: w.Organization, ProjectID: w.ProjectID,
		TerraformVersion: w.Settings.TerraformVersion, WorkingDirectory: w.Settings.WorkingDirectory,
		ExecutionMode: mode, AutoApply: w.Settings.AutoApply, StructuredRunOutput: w.Settings.StructuredRunOutputEnabled,
	}
}

func (a runWorkspaces) Get(ctx context.Context, id string) (*run.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.convert(ctx, w), nil
}

func (a runWorkspaces) System(ctx context.Context, id string) (*run.Workspace, error) {
	w, err := a.ws.System(ctx, id)
	if err != nil {
		return nil, err
	}
	a.pools = nil // no caller to check the pool against
	return a.convert(ctx, w), nil
}

func (a runWorkspaces) LockForRun(ctx context.Context, q store.Q, wsID, runID string) (bool, error) {
	return a.ws.LockForRun(ctx, q, wsID, runID)
}

func (a runWorkspaces) UnlockForRun(ctx context.Context, q store.Q, wsID, runID string) error {
	return a.ws.UnlockForRun(ctx, q, wsID, runID)
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

// localRunner is the runner.API of the in-process runner: the run service
// for the job lifecycle, plus the inputs it gathers from the other domains
// directly. A remote agent gets the same calls over HTTPS.
type localRunner struct {
	s *Server
}

func (l localRunner) Claim(ctx context.Context, runnerID string) (*run.Job, error) {
	return l.s.Runs.Claim(ctx, runnerID)
}

func (l localRunner) Heartbeat(ctx context.Context, jobID, runnerID string) (string, error) {
	return l.s.Runs.Heartbeat(ctx, jobID, runnerID)
}

func (l localRunner) AppendLog(ctx context.Context, logID string, data []byte) error {
	return l.s.Runs.AppendLog(ctx, logID, data)
}

func (l localRunner) FinishPlan(ctx context.Context, jobID, runnerID string, res run.PlanResult) (bool, error) {
	return l.s.Runs.FinishPlan(ctx, jobID, runnerID, res)
}

func (l localRunner) FinishApply(ctx context.Context, jobID, runnerID string, res run.ApplyResult) error {
	return l.s.Runs.FinishApply(ctx, jobID, runnerID, res, runStates{l.s.States, l.s.Workspaces})
}

// Inputs gathers what a job needs. The run token it mints lives as long
// as the run: auth refuses run tokens of finished runs.
func (l localRunner) Inputs(ctx context.Context, job *run.Job) (*runner.Inputs, error) {
	r := job.Run
	ws, err := runWorkspaces{ws: l.s.Workspaces}.System(ctx, r.WorkspaceID)
	if err != nil {
		return nil, err
	}
	in := &runner.Inputs{Workspace: ws, Hostname: l.s.Hostname, CAFile: l.s.CAFile}
	if l.s.Runs.Stages != nil && job.Phase == "plan" {
		if in.KeepPlan, err = l.s.Runs.Stages.Has(ctx, r.ID, run.StagePostPlan, run.StagePreApply); err != nil {
			return nil, err
		}
	}
	rc, _, err := l.s.ConfigVersions.OpenArchiveUnchecked(ctx, r.ConfigurationVersionID)
	if err != nil {
		return nil, fmt.Errorf("reading configuration version %s: %w", r.ConfigurationVersionID, err)
	}
	in.Archive, err = io.ReadAll(rc)
	rc.Close()
	if err != nil {
		return nil, err
	}
	if _, raw, err := l.s.States.CurrentState(ctx, r.WorkspaceID); err == nil {
		in.State = raw
	} else if core.KindOf(err) != core.KindNotFound {
		return nil, fmt.Errorf("reading the current state: %w", err)
	}
	vars, err := l.s.Variables.EffectiveVariables(ctx, r.WorkspaceID, ws.ProjectID)
	if err != nil {
		return nil, fmt.Errorf("reading variables: %w", err)
	}
	for _, v := range vars {
		in.Variables = append(in.Variables, runner.Variable{Key: v.Key, Value: v.Value, Category: string(v.Category), HCL: v.HCL, Sensitive: v.Sensitive})
	}
	exp := core.Now().Add(24 * time.Hour)
	_, in.Token, err = l.s.Auth.CreateToken(ctx, l.s.DB, auth.NewToken{Kind: auth.KindRun, Subject: r.ID, Description: "run token", ExpiredAt: &exp})
	if err != nil {
		return nil, err
	}
	if job.Phase == "apply" {
		if in.PlanFile, err = l.s.Runs.PlanBlob(ctx, r.Plan.ID, "tfplan"); err != nil {
			return nil, fmt.Errorf("reading the saved plan: %w", err)
		}
		if lock, err := l.s.Runs.PlanBlob(ctx, r.Plan.ID, "lock"); err == nil {
			in.LockFile = lock
		}
	}
	return in, nil
}

// runStates stores an apply's state as a state version written by the run
// (which holds the workspace lock).
type runStates struct {
	states *state.Service
	ws     *workspace.Service
}

func (a runStates) CreateFromRun(ctx context.Context, workspaceID, runID string, raw []byte) error {
	var head struct {
		Serial  int64  `json:"serial"`
		Lineage string `json:"lineage"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return fmt.Errorf("the state terraform wrote is not JSON: %w", err)
	}
	w, err := a.ws.System(ctx, workspaceID)
	if err != nil {
		return err
	}
	ctx = auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindRun, RunID: runID, WorkspaceID: w.ID, Organization: w.Organization})
	sum := md5.Sum(raw)
	md := hex.EncodeToString(sum[:])
	_, err = a.states.Create(ctx, workspaceID, state.CreateOptions{Serial: &head.Serial, Lineage: &head.Lineage, MD5: &md, RunID: runID, State: raw})
	return err
}

// wireRuns builds the run service and connects it to the other domains.
func (s *Server) wireRuns() {
	s.Runs = run.NewService(run.Options{
		DB: s.DB, Blobs: s.Blobs, Signer: s.Signer, Logger: s.logger.With("component", "runs"),
		Workspaces: runWorkspaces{s.Workspaces, s.AgentPools}, Configs: runConfigs{s.DB},
	})
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
// as whoever created the version (the upload itself carries no token). A
// refusal comes back to the configuration version domain, which records
// it on the version.
func (s *Server) queueUploadedRun(ctx context.Context, cv *configversion.ConfigurationVersion) error {
	if cv.CreatedByToken == "" {
		return core.Forbidden("configuration version %s has no creator to queue its run as", cv.ID)
	}
	p, err := s.Auth.PrincipalOfToken(ctx, cv.CreatedByToken)
	if err != nil {
		return fmt.Errorf("the token that created configuration version %s: %w", cv.ID, err)
	}
	_, err = s.Runs.Create(auth.WithPrincipal(ctx, p), run.CreateOptions{WorkspaceID: cv.WorkspaceID, ConfigurationVersionID: cv.ID,
		Source: "tfe-configuration-version"})
	return err
}

// runAPI registers the run routes.
func (s *Server) runAPI(api, capability *http.ServeMux, wsAPI *workspace.API) {
	runAPI := &run.API{
		Service:    s.Runs,
		TaskStages: (&runtask.API{Service: s.RunTasks}).RunStages,
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
	r := runner.New(s.Metrics.CountClaims(localRunner{s}), runner.Config{
		ID: id, Concurrency: s.cfg.RunnerConcurrency, Engines: s.engines, ScratchDir: s.cfg.ScratchDir,
		CLIConfig: s.cfg.RunCLIConfig, PluginCacheDir: s.cfg.PluginCacheDir, Wake: s.Runs.Wake(),
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
	if err := writeFileAtomic(path, []byte(id+"\n"), 0o600); err != nil {
		// Without a stable ID the jobs of earlier processes are still
		// recovered, when their leases expire.
		s.logger.Warn("writing the instance ID", "error", err)
	}
	return id
}
