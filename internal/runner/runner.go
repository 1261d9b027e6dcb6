// Package runner executes run jobs: it claims a job, prepares a scratch
// folder (configuration, state, variables, CLI config with a per-run
// token), runs terraform or tofu, streams the output with sensitive values
// masked, uploads the state terraform saves while it applies, and reports
// the result. The in-process runner and `terrace agent` are the same
// runner speaking the job protocol (internal/jobapi) through an API.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/run"
)

// Variable is a variable a run gets.
type Variable struct {
	Key, Value, Category string // category: terraform | env | file (CategoryFile)
	HCL, Sensitive       bool
	// Expand: the value of this environment variable names run files
	// (FilesDir). A runner that predates it passes the value as it is.
	Expand bool `json:",omitempty"`
}

// Inputs are what a job needs besides the run itself.
type Inputs struct {
	Workspace *run.Workspace
	Archive   []byte // configuration version tar.gz
	State     []byte // current state, nil when none
	Variables []Variable
	// Token is a run token, valid while the run lasts, for reading remote
	// state from Terrace; Hostname and CAFile say where Terrace is.
	Token, Hostname, CAFile string
	// PlanFile and LockFile are the saved plan for an apply job.
	PlanFile, LockFile []byte
	// KeepPlan: the run waits between plan and apply (run tasks) even
	// when it auto-applies, so the plan job keeps the saved plan.
	KeepPlan bool `json:",omitempty"`
	// Masks are values to mask and nothing else (never variables, files
	// or environment): the sensitive run variables (a stack deployment's
	// sensitive inputs) of the run that wrote the current state, which
	// terraform may print as previous values even where the state does
	// not mark them sensitive.
	Masks []string `json:",omitempty"`
	// ProjectName names the workspace's project (TFC_PROJECT_NAME): a
	// server that predates it sends none, and an agent that predates it
	// ignores it.
	ProjectName string `json:",omitempty"`
	// Engine is where the runner downloads the run's engine version when
	// it lacks it: the builds of a version a site admin registered and
	// enabled (nil for any other version; a server that predates it
	// sends none, and an agent that predates it ignores it).
	Engine *engine.Release `json:",omitempty"`
	// PlanTimeout and ApplyTimeout are the time limits of a plan and of
	// an apply (0: none): the site's plan-timeout and apply-timeout
	// settings, or the organization's own when OwnPlanTimeout or
	// OwnApplyTimeout says so. A phase running longer is stopped, and
	// errors saying so. A server that predates them sends none (and
	// predating the Own… fields, the organization's limits are told as
	// the site's).
	PlanTimeout     time.Duration `json:",omitempty"`
	ApplyTimeout    time.Duration `json:",omitempty"`
	OwnPlanTimeout  bool          `json:",omitempty"`
	OwnApplyTimeout bool          `json:",omitempty"`
	// NoNewPrivs: the organization does not let its runs gain privileges
	// (no terraform-worker-sudo-enabled), so terraform starts with
	// Linux's no_new_privs, which its children keep: sudo and every
	// other setuid or file-capability program run without gaining
	// anything. An agent that predates it ignores it.
	NoNewPrivs bool `json:",omitempty"`
	// ApplyEnv are environment variables that replace the plan's when a
	// plan job goes on to apply (auto-apply): the apply phase's workload
	// identity tokens. A server that predates them sends none, and an
	// agent that predates them applies with the plan's.
	ApplyEnv []Variable `json:",omitempty"`
}

// API is the server as a runner sees it (internal/jobapi.Client).
type API interface {
	// Claim waits a while for a job; nil when none came.
	Claim(ctx context.Context, runnerID string) (*run.Job, error)
	// Heartbeat extends the job's lease, waiting a while for a signal
	// (run.NoSignal when none came).
	Heartbeat(ctx context.Context, jobID, runnerID string) (run.Signal, error)
	Inputs(ctx context.Context, job *run.Job) (*Inputs, error)
	AppendLog(ctx context.Context, jobID, logID string, data []byte) error
	// SaveState stores a state snapshot terraform wrote mid-apply.
	SaveState(ctx context.Context, jobID string, state []byte) error
	FinishPlan(ctx context.Context, jobID, runnerID string, res run.PlanResult) (bool, error)
	// SavePlanJSON uploads the JSON of a plan reported without it
	// (PlanResult.JSONLater), made by the job that applies it (after the
	// apply was reported, or beside it for a CLI-driven run), or why it
	// could not be made; after the apply was reported it ends the job.
	SavePlanJSON(ctx context.Context, jobID, runnerID string, d run.PlanDescription) error
	FinishApply(ctx context.Context, jobID, runnerID string, res run.ApplyResult) error
}

// Config configures a runner.
type Config struct {
	// ID identifies the runner in job leases. Defaults to a random ID.
	ID string
	// Concurrency is how many jobs run at once. Defaults to 2.
	Concurrency int
	// Engines finds terraform/tofu binaries.
	Engines *engine.Finder
	// ScratchDir is where job folders are made. Defaults to the OS temp dir.
	ScratchDir string
	// PluginCacheDir, when set, is shared by all jobs (TF_PLUGIN_CACHE_DIR).
	PluginCacheDir string
	// CLIConfig is extra CLI configuration (provider_installation, …)
	// appended to each job's terraform CLI config.
	CLIConfig string
	// CancelGrace is how long terraform gets to stop after SIGINT before
	// SIGKILL. Defaults to 10s.
	CancelGrace time.Duration
	// Heartbeat is the longest time between heartbeats after a signal
	// or an error (a heartbeat otherwise waits for a signal on the
	// server). Defaults to 5s.
	Heartbeat time.Duration
	// Poll is how long to wait before claiming again after an error.
	// Defaults to 2s.
	Poll time.Duration
	// SnapshotEvery is how often the state file is checked for a new
	// snapshot during an apply. Defaults to 1s.
	SnapshotEvery time.Duration
	// OnFault, when set, hears of every job that failed because of the
	// runner itself (see Fault); `terrace agent` reports itself errored.
	OnFault func(job *run.Job, err error)
	// Describe, when set, is a line added to each phase's log after the
	// header (an agent names itself there).
	Describe string
	Logger   *slog.Logger
}

// Runner claims and executes jobs.
type Runner struct {
	cfg   Config
	api   API
	stop  context.CancelFunc
	drain context.CancelFunc
	wg    sync.WaitGroup
	busy  atomic.Int32
	// schemas caches provider schemas for the redacted plan JSON.
	schemas schemaCache
}

// New returns a runner.
func New(api API, cfg Config) *Runner {
	if cfg.ID == "" {
		cfg.ID = "runner-" + core.RandomString(10)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.Engines == nil {
		cfg.Engines = &engine.Finder{}
	}
	if cfg.CancelGrace == 0 {
		cfg.CancelGrace = 10 * time.Second
	}
	if cfg.Heartbeat == 0 {
		cfg.Heartbeat = 5 * time.Second
	}
	if cfg.Poll == 0 {
		cfg.Poll = 2 * time.Second
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	// terraform runs in a job's folder: a relative folder handed to it
	// (the job folder's own files, the plugin cache) would be looked up
	// from there, not from where the runner was started.
	for _, dir := range []*string{&cfg.ScratchDir, &cfg.PluginCacheDir} {
		if *dir != "" {
			if abs, err := filepath.Abs(*dir); err == nil {
				*dir = abs
			}
		}
	}
	return &Runner{cfg: cfg, api: api}
}

// scratchPrefix starts the name of every job folder, followed by the
// runner's ID and the run's.
const scratchPrefix = "terrace-"

// RemoveScratch removes the job folders of earlier runners whose IDs start
// with prefix (never this runner's): what a killed process left behind,
// variable files with sensitive values among it. The caller vouches that
// those runners are gone.
func (r *Runner) RemoveScratch(prefix string) (int, error) {
	dir := r.cfg.ScratchDir
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, scratchPrefix+prefix) || strings.HasPrefix(name, scratchPrefix+r.cfg.ID+"-") {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, name)); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// ID returns the runner's ID.
func (r *Runner) ID() string { return r.cfg.ID }

// Start launches the workers; Stop or Drain ends them.
func (r *Runner) Start(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	claimCtx, drain := context.WithCancel(ctx)
	r.drain = drain
	for range r.cfg.Concurrency {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.work(ctx, claimCtx)
		}()
	}
}

// Stop stops claiming, interrupts running jobs and waits for the workers.
func (r *Runner) Stop() {
	if r.stop != nil {
		r.stop()
	}
	r.wg.Wait()
}

// Drain stops claiming and waits for the running jobs to end on their own.
func (r *Runner) Drain() {
	if r.drain != nil {
		r.drain()
	}
	r.wg.Wait()
}

// Busy reports how many jobs the runner is executing.
func (r *Runner) Busy() int { return int(r.busy.Load()) }

// work claims (on claimCtx, which Drain cancels) and executes (on ctx,
// which Stop cancels) until claimCtx ends.
func (r *Runner) work(ctx, claimCtx context.Context) {
	for claimCtx.Err() == nil {
		job, err := r.api.Claim(claimCtx, r.cfg.ID)
		if err != nil {
			if claimCtx.Err() != nil {
				return
			}
			r.cfg.Logger.Error("claiming a job", "error", err)
			select {
			case <-claimCtx.Done():
				return
			case <-time.After(r.cfg.Poll):
			}
			continue
		}
		if job == nil {
			continue
		}
		r.busy.Add(1)
		r.execute(ctx, job)
		r.busy.Add(-1)
	}
}

// execute runs one job to its end and reports it; errors in reporting are
// logged (the job's lease will expire and the server recovers it).
func (r *Runner) execute(ctx context.Context, job *run.Job) {
	log := r.cfg.Logger.With("run", job.RunID, "job", job.ID, "phase", job.Phase)
	j := &jobExec{r: r, job: job, log: log}
	defer j.took("job", time.Now())
	if err := j.run(ctx); err != nil {
		log.Error("job failed to report", "error", err)
		if ctx.Err() == nil {
			r.fault(job, Fault{Err: fmt.Errorf("reporting the job: %w", err)})
		}
	}
}

// Fault is a job failure caused by the runner, not by the run: its engine
// cannot be found or installed, its working folder cannot be written, the
// job protocol failed. The run errors with it like any other failure;
// the runner also tells Config.OnFault.
type Fault struct{ Err error }

func (f Fault) Error() string { return f.Err.Error() }
func (f Fault) Unwrap() error { return f.Err }

// fault passes err to Config.OnFault when it is a Fault, and returns it.
func (r *Runner) fault(job *run.Job, err error) error {
	var f Fault
	if r.cfg.OnFault != nil && errors.As(err, &f) {
		r.cfg.OnFault(job, f.Err)
	}
	return err
}
