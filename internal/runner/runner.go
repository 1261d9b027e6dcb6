// Package runner executes run jobs: it claims a job, prepares a scratch
// folder (configuration, state, variables, CLI config with a per-run
// token), runs terraform or tofu, streams the output with sensitive values
// masked, and reports the result. The in-process runner and a remote agent
// use the same API interface.
package runner

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/run"
)

// Variable is a variable a run gets.
type Variable struct {
	Key, Value, Category string // category: terraform | env
	HCL, Sensitive       bool
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
}

// API is the server as a runner sees it.
type API interface {
	Claim(ctx context.Context, runnerID string) (*run.Job, error)
	Heartbeat(ctx context.Context, jobID, runnerID string) (string, error)
	Inputs(ctx context.Context, job *run.Job) (*Inputs, error)
	AppendLog(ctx context.Context, logID string, data []byte) error
	FinishPlan(ctx context.Context, jobID, runnerID string, res run.PlanResult) (bool, error)
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
	// Heartbeat is the heartbeat interval. Defaults to 5s.
	Heartbeat time.Duration
	// Wake, when set, nudges the runner to claim at once.
	Wake <-chan struct{}
	// Poll is how often to look for jobs without a nudge. Defaults to 2s.
	Poll   time.Duration
	Logger *slog.Logger
}

// Runner claims and executes jobs.
type Runner struct {
	cfg  Config
	api  API
	stop context.CancelFunc
	wg   sync.WaitGroup
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
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

// Start launches the workers; Stop ends them.
func (r *Runner) Start(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	for range r.cfg.Concurrency {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.work(ctx)
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

func (r *Runner) work(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		for ctx.Err() == nil {
			job, err := r.api.Claim(ctx, r.cfg.ID)
			if err != nil {
				if ctx.Err() == nil {
					r.cfg.Logger.Error("claiming a job", "error", err)
				}
				break
			}
			if job == nil {
				break
			}
			r.execute(ctx, job)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.cfg.Wake:
		case <-t.C:
		}
	}
}

// execute runs one job to its end and reports it; errors in reporting are
// logged (the job's lease will expire and the server recovers it).
func (r *Runner) execute(ctx context.Context, job *run.Job) {
	log := r.cfg.Logger.With("run", job.RunID, "job", job.ID, "phase", job.Phase)
	j := &jobExec{r: r, job: job, log: log}
	if err := j.run(ctx); err != nil {
		log.Error("job failed to report", "error", err)
	}
}
