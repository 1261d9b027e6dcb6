// Package jobapi is the job protocol: how a runner (the server's own
// in-process runner, or `terrace agent` on another machine) claims run
// jobs, heartbeats, streams logs, uploads state and reports results. It is
// plain HTTP+JSON under /api/agent/, authenticated by agent tokens; the
// in-process runner speaks it through an in-process transport (no
// network, the same handler), so there is one runner code path.
// docs/design/agents.md describes the endpoints and the job lifecycle.
package jobapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/forward"
	"github.com/terracehq/terrace/internal/idtoken"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Prefix is where the job protocol lives (not under /api/v2: it is not
// part of the TFE API).
const Prefix = "/api/agent/"

// RunnerHeader names the runner (its lease holder ID) on every call.
const RunnerHeader = "X-Terrace-Runner"

// FeaturesHeader lists, comma-separated, what the runner does beyond the
// protocol's first version, so that the server never hands it a job it
// would get wrong: FeatureRunFiles, it writes run files
// (runner.CategoryFile); FeatureVaultLogin, it logs in to Vault and reads
// AWS credentials from it (runner.CategoryVaultLogin, CategoryVaultRead).
// A runner that predates them sends none.
const (
	FeaturesHeader    = "X-Terrace-Runner-Features"
	FeatureRunFiles   = "run-files"
	FeatureVaultLogin = "vault-login"
)

// Agents is the agent domain as the protocol sees it.
type Agents interface {
	// Register records a new agent of a pool and returns its ID.
	Register(ctx context.Context, poolID, name, address string) (string, error)
	// AgentPool returns the pool of an agent ("" when it does not exist).
	AgentPool(ctx context.Context, agentID string) (string, error)
	// SetStatus records what an agent reports (idle, busy, exited, errored)
	// and that it is alive.
	SetStatus(ctx context.Context, agentID, status string) error
}

// Sources gather what a job needs from the domains that own it.
type Sources struct {
	// Archive opens a configuration version's tar.gz.
	Archive func(ctx context.Context, cvID string) (io.ReadCloser, error)
	// State returns the workspace's current state (nil when none) and the
	// run that wrote it ("" when none did).
	State func(ctx context.Context, workspaceID string) (state []byte, runID string, err error)
	// Variables returns the variables a run of the workspace (of
	// organization org, in project projectID) gets.
	Variables func(ctx context.Context, org, workspaceID, projectID string) ([]runner.Variable, error)
	// RunToken mints a token for the run, valid while the run lasts.
	RunToken func(ctx context.Context, runID string) (string, error)
	// SaveState stores a state terraform wrote during the run's apply.
	SaveState func(ctx context.Context, workspaceID, runID string, state []byte) error
	// ProjectName returns a project's name ("" when it is gone).
	ProjectName func(ctx context.Context, projectID string) (string, error)
	// Engine, when set, returns where a runner may download the engine
	// version a run asks for (a version a site admin registered and
	// enabled; nil for any other): with beta, versions registered as beta
	// are among those a constraint may pick, and without it a beta
	// version asked for by name is refused.
	Engine func(ctx context.Context, version string, beta bool) (*engine.Release, error)
	// Limits returns what the runs of an organization may take and do,
	// read when a job starts.
	Limits func(ctx context.Context, org string) (Limits, error)
	// IdentityTokens, when set, returns the workload identity tokens the
	// run gets for each phase asked (phase → how long its tokens live),
	// as sensitive environment variables (masked in its logs like any
	// sensitive variable), given what was gathered for its job: none when
	// the run's variables ask for none.
	IdentityTokens func(ctx context.Context, r *run.Run, in *runner.Inputs, ttls map[run.JobPhase]time.Duration) (map[run.JobPhase][]runner.Variable, error)
}

// Limits are what an organization's runs may take and do: the site's
// settings and the organization's own (the admin organizations API).
type Limits struct {
	// Plan and Apply are the time limits of a plan and an apply (0:
	// none); OwnPlan and OwnApply say the organization set them, rather
	// than the site.
	Plan, Apply       time.Duration
	OwnPlan, OwnApply bool
	// Beta lets runs use terraform versions registered as beta; Sudo lets
	// them gain privileges (without it terraform starts with
	// no_new_privs).
	Beta, Sudo bool
}

// Options configure the protocol's server side.
type Options struct {
	Runs    *run.Service
	Agents  Agents
	Sources Sources
	// Forwards, when set, gives agents the requests their pool forwards
	// (internal/forward).
	Forwards *forward.Service
	// Tests, when set, gives agents the module test runs of their pool
	// (tests.go).
	Tests *moduletest.Service
	// Hostname is the server's host[:port] as runs reach it.
	Hostname string
	// MaxWait bounds a long-poll (claim, heartbeat). Defaults to 30s.
	MaxWait time.Duration
	Logger  *slog.Logger
}

// Server serves the job protocol.
type Server struct {
	o Options
}

// NewServer returns the protocol's server side.
func NewServer(o Options) (*Server, error) {
	if o.Runs == nil || o.Agents == nil || o.Sources.Archive == nil || o.Sources.State == nil || o.Sources.Variables == nil ||
		o.Sources.RunToken == nil || o.Sources.SaveState == nil || o.Sources.ProjectName == nil || o.Sources.Limits == nil {
		return nil, errors.New("jobapi: runs, agents and every source are required")
	}
	if o.MaxWait <= 0 {
		o.MaxWait = 30 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Server{o: o}, nil
}

// Register adds the protocol's routes to mux. The caller's principal must
// already be in the request context (auth middleware, or the in-process
// transport).
func (s *Server) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/agent/register", s.handle(s.register))
	mux.HandleFunc("POST /api/agent/status", s.handle(s.status))
	mux.HandleFunc("POST /api/agent/claim", s.handle(s.claim))
	mux.HandleFunc("POST /api/agent/jobs/{id}/heartbeat", s.handle(s.heartbeat))
	mux.HandleFunc("GET /api/agent/jobs/{id}/inputs", s.handle(s.inputs))
	mux.HandleFunc("POST /api/agent/jobs/{id}/logs/{log}", s.handle(s.appendLog))
	mux.HandleFunc("PUT /api/agent/jobs/{id}/state", s.handle(s.saveState))
	mux.HandleFunc("POST /api/agent/jobs/{id}/plan", s.handle(s.finishPlan))
	mux.HandleFunc("PUT /api/agent/jobs/{id}/plan-json", s.handle(s.savePlanJSON))
	mux.HandleFunc("POST /api/agent/jobs/{id}/apply", s.handle(s.finishApply))
	s.registerForwards(mux)
	s.registerTests(mux)
}

func (s *Server) handle(h func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			tfeapi.Error(w, r, err)
		}
	}
}

// maxBody bounds what a runner may send in one call (a state or a plan
// with its JSON); log chunks are far smaller.
const maxBody = 512 << 20

func decode(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, maxBody)).Decode(v); err != nil {
		return core.Invalid("the request body is not valid JSON: %v", err)
	}
	return nil
}

func respond(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// runnerOf returns the runner ID of a call, checked against the caller:
// an agent token acts only as an agent of its own pool.
func (s *Server) runnerOf(r *http.Request) (string, error) {
	id := r.Header.Get(RunnerHeader)
	if id == "" {
		return "", core.Invalid("the %s header is required", RunnerHeader)
	}
	p := auth.FromContext(r.Context())
	if p != nil && p.Kind == auth.KindAgent {
		pool, err := s.o.Agents.AgentPool(r.Context(), id)
		if err != nil {
			return "", err
		}
		if pool != p.AgentPoolID {
			return "", core.NotFound("agent %s not found", id)
		}
	}
	return id, nil
}

// poolOf is the agent pool whose jobs the caller may claim.
func poolOf(ctx context.Context) (string, error) {
	p := auth.FromContext(ctx)
	if p == nil {
		return "", core.Unauthorized("this request needs an agent token in the Authorization header")
	}
	switch p.Kind {
	case auth.KindAgent:
		return p.AgentPoolID, authz.Allows(ctx, authz.AgentJobs, authz.Resource{Organization: p.Organization, AgentPoolID: p.AgentPoolID})
	case auth.KindRunner:
		return "", authz.Allows(ctx, authz.AgentJobs, authz.Resource{})
	}
	return "", authz.Allows(ctx, authz.AgentJobs, authz.Resource{Organization: p.Organization})
}

// job loads a job and checks that the caller may act on it and holds it.
func (s *Server) job(r *http.Request) (*run.JobInfo, string, error) {
	ctx := r.Context()
	j, err := s.o.Runs.JobInfo(ctx, r.PathValue("id"))
	if err != nil {
		return nil, "", err
	}
	p := auth.FromContext(ctx)
	org := ""
	if p != nil {
		org = p.Organization
	}
	if err := authz.Allows(ctx, authz.AgentJobs, authz.Resource{Organization: org, AgentPoolID: j.Pool}); err != nil {
		return nil, "", err
	}
	runnerID, err := s.runnerOf(r)
	if err != nil {
		return nil, "", err
	}
	if j.RunnerID != runnerID || j.Status != "running" {
		return nil, "", core.Conflict("job %s is not held by runner %s", j.ID, runnerID)
	}
	return j, runnerID, nil
}

// jobCall is a call on one job, opened: its body decoded, the job
// loaded and held by the calling runner, and (when asked) its run read.
type jobCall struct {
	job    *run.JobInfo
	runner string
	run    *run.Run
}

// openJob opens a call on the job the path names: it decodes the JSON body
// into req (nil: the body is not JSON, the handler reads it), checks with
// job that the caller holds the job, and with withRun reads its run.
func (s *Server) openJob(r *http.Request, req any, withRun bool) (*jobCall, error) {
	if req != nil {
		if err := decode(r, req); err != nil {
			return nil, err
		}
	}
	j, runnerID, err := s.job(r)
	if err != nil {
		return nil, err
	}
	c := &jobCall{job: j, runner: runnerID}
	if withRun {
		if c.run, err = s.o.Runs.System(r.Context(), j.RunID); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// RegisterRequest registers an agent.
type RegisterRequest struct {
	Name string `json:"name"`
}

// RegisterResponse names the new agent: its ID is its runner ID.
type RegisterResponse struct {
	ID   string `json:"id"`
	Pool string `json:"pool"`
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := auth.FromContext(ctx)
	if p == nil || p.Kind != auth.KindAgent {
		return core.Forbidden("only agent tokens register agents")
	}
	pool, err := poolOf(ctx)
	if err != nil {
		return err
	}
	var req RegisterRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	id, err := s.o.Agents.Register(ctx, pool, req.Name, clientAddress(r))
	if err != nil {
		return err
	}
	respond(w, http.StatusCreated, RegisterResponse{ID: id, Pool: pool})
	return nil
}

func clientAddress(r *http.Request) string {
	host := r.RemoteAddr
	for i := len(host) - 1; i >= 0; i-- {
		if host[i] == ':' {
			return host[:i]
		}
	}
	return host
}

// StatusRequest is an agent's report of its own status.
type StatusRequest struct {
	Status string `json:"status"` // idle, busy, exited, errored
}

func (s *Server) status(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	p := auth.FromContext(ctx)
	if p == nil || p.Kind != auth.KindAgent {
		w.WriteHeader(http.StatusNoContent) // the in-process runner has no agent record
		return nil
	}
	id, err := s.runnerOf(r)
	if err != nil {
		return err
	}
	var req StatusRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	if err := s.o.Agents.SetStatus(ctx, id, req.Status); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// ClaimRequest asks for a job, waiting up to WaitMS for one.
type ClaimRequest struct {
	WaitMS int64 `json:"wait_ms"`
	// Queue is the job queue ("runs" unless the server's assessment
	// runner asks for "assessments").
	Queue string `json:"queue,omitempty"`
}

// Job is a claimed job on the wire.
type Job struct {
	ID    string       `json:"id"`
	RunID string       `json:"run_id"`
	Phase run.JobPhase `json:"phase"`
	Run   *run.Run     `json:"run"`
	// LeaseMS is the job's lease (the server's --job-heartbeat-timeout):
	// a runner silent this long loses the job, so it heartbeats well
	// within it.
	LeaseMS int64 `json:"lease_ms"`
	// Inputs are what GET …/inputs answers, gathered with the claim so
	// that a job starts after one round trip, not two. Absent when they
	// could not be gathered: the runner then asks for them, and that
	// call's error fails the job as before.
	Inputs *runner.Inputs `json:"inputs,omitempty"`
	// Test, instead of a run's phase, is a module test run (for an agent
	// that runs them: FeatureModuleTests); ID is the test run's.
	Test *TestJob `json:"test,omitempty"`
}

func (s *Server) wait(ms int64) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	if d < 0 {
		d = 0
	}
	return min(d, s.o.MaxWait)
}

func (s *Server) claim(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	pool, err := poolOf(ctx)
	if err != nil {
		return err
	}
	runnerID, err := s.runnerOf(r)
	if err != nil {
		return err
	}
	var req ClaimRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	queue := run.QueueRuns
	if req.Queue != "" && req.Queue != string(run.QueueRuns) {
		if p := auth.FromContext(ctx); p.Kind != auth.KindRunner || req.Queue != string(run.QueueAssessments) {
			return core.Invalid("queue %q is not a queue this runner may claim from", req.Queue)
		}
		queue = run.QueueAssessments
	}
	agent := auth.FromContext(ctx).Kind == auth.KindAgent
	wait := s.wait(req.WaitMS)
	if agent {
		// An idle agent shows it is alive by claiming: it must come back
		// well within the heartbeat timeout, or it would read "unknown"
		// while it waits here.
		wait = min(wait, s.o.Runs.LeaseTTL/3)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	// In line before the first attempt: a job queued meanwhile rouses it.
	waiter := s.o.Runs.WaitForClaim(queue, pool)
	defer waiter.Leave()
	tests := s.runsTests(r) // agents only
	var testQueued <-chan struct{}
	for {
		if tests {
			testQueued = s.o.Tests.Queued()
		}
		job, err := s.o.Runs.ClaimPool(ctx, runnerID, queue, pool)
		if err != nil {
			return err
		}
		waiter.Claimed(job != nil)
		if job == nil && tests {
			test, err := s.claimTest(ctx, runnerID, pool)
			if err != nil {
				return err
			}
			if test != nil {
				respond(w, http.StatusOK, test)
				return nil
			}
		}
		if job != nil {
			if agent {
				if err := s.o.Agents.SetStatus(ctx, runnerID, "busy"); err != nil {
					s.o.Logger.Warn("recording an agent's status", "agent", runnerID, "error", err)
				}
			}
			out := Job{ID: job.ID, RunID: job.RunID, Phase: job.Phase, Run: job.Run, LeaseMS: s.o.Runs.LeaseTTL.Milliseconds()}
			if out.Inputs, err = s.gather(ctx, job.Run, job.Phase); err != nil {
				s.o.Logger.Debug("a claimed job's inputs are left to its runner to ask for", "job", job.ID, "error", err)
			}
			respond(w, http.StatusOK, out)
			return nil
		}
		if agent {
			if err := s.o.Agents.SetStatus(ctx, runnerID, "idle"); err != nil {
				return err
			}
		}
		select {
		case <-waiter.C():
			waiter.Roused()
		case <-testQueued:
		case <-deadline.C:
			w.WriteHeader(http.StatusNoContent)
			return nil
		case <-ctx.Done():
			return nil // the runner stopped waiting (it drains or stops)
		}
	}
}

// HeartbeatRequest extends a job's lease and waits up to WaitMS for a
// cancel signal.
type HeartbeatRequest struct {
	WaitMS int64 `json:"wait_ms"`
}

// HeartbeatResponse carries a signal for the job: "", "cancel" or "force".
type HeartbeatResponse struct {
	Signal run.Signal `json:"signal"`
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var req HeartbeatRequest
	c, err := s.openJob(r, &req, false)
	if k := core.KindOf(err); k == core.KindNotFound || k == core.KindConflict {
		// Force-canceled, reaped or taken over: the runner must stop.
		respond(w, http.StatusOK, HeartbeatResponse{Signal: run.SignalForce})
		return nil
	}
	if err != nil {
		return err
	}
	sig, err := s.o.Runs.Heartbeat(ctx, c.job.ID, c.runner)
	if err != nil {
		return err
	}
	if sig == run.NoSignal {
		// Wait no longer than a third of the lease, which this call has
		// just extended.
		sig = s.o.Runs.WaitSignal(ctx, c.job.RunID, min(s.wait(req.WaitMS), s.o.Runs.LeaseTTL/3))
	}
	if p := auth.FromContext(ctx); p.Kind == auth.KindAgent {
		if err := s.o.Agents.SetStatus(ctx, c.runner, "busy"); err != nil {
			s.o.Logger.Warn("recording an agent's status", "agent", c.runner, "error", err)
		}
	}
	respond(w, http.StatusOK, HeartbeatResponse{Signal: sig})
	return nil
}

func (s *Server) inputs(w http.ResponseWriter, r *http.Request) error {
	c, err := s.openJob(r, nil, true)
	if err != nil {
		return err
	}
	in, err := s.gather(r.Context(), c.run, c.job.Phase)
	if err != nil {
		return err
	}
	if err := needsFeatures(in, r.Header.Get(FeaturesHeader)); err != nil {
		return err
	}
	respond(w, http.StatusOK, in)
	return nil
}

// needsFeatures refuses a job's inputs to a runner without the features
// they need (features: its FeaturesHeader): run files and Vault logins,
// which one that predates them would drop, leaving the run without the
// credentials its variables asked for.
func needsFeatures(in *runner.Inputs, features string) error {
	has := featureSet(features)
	for _, v := range slices.Concat(in.Variables, in.ApplyEnv) {
		need := ""
		switch {
		case v.Category == runner.CategoryVaultLogin || v.Category == runner.CategoryVaultRead:
			need = FeatureVaultLogin
		case v.Category == runner.CategoryFile || v.Expand:
			need = FeatureRunFiles
		}
		if need != "" && !has[need] {
			return core.Invalid("this run's variables ask for dynamic provider credentials (%s), which this runner cannot handle (it lacks %s): upgrade the agent", v.Key, need)
		}
	}
	return nil
}

// featureSet is the set of features a FeaturesHeader lists.
func featureSet(features string) map[string]bool {
	has := map[string]bool{}
	for _, f := range strings.Split(features, ",") {
		has[strings.TrimSpace(f)] = true
	}
	return has
}

// hasFeature says whether the runner calling r lists feature f.
func hasFeature(r *http.Request, f string) bool {
	return featureSet(r.Header.Get(FeaturesHeader))[f]
}

// gather collects what a job needs. The run token it mints lives as long
// as the run: auth refuses run tokens of finished runs. The reads are
// independent of each other (but for the variables and the project's
// name, which need the workspace's project, and so follow the workspace's
// read, side by side), so they are made side by side: on PostgreSQL each
// is a round trip on the run's critical path.
func (s *Server) gather(ctx context.Context, r *run.Run, phase run.JobPhase) (*runner.Inputs, error) {
	in := &runner.Inputs{Hostname: s.o.Hostname}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	side := func(i int, fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn()
		}()
	}
	if s.o.Runs.Stages != nil && phase == run.PhasePlan {
		side(0, func() (err error) {
			in.KeepPlan, err = s.o.Runs.Stages.Has(ctx, r.ID, run.StagePostPlan, run.StagePreApply)
			return err
		})
	}
	side(1, func() error {
		rc, err := s.o.Sources.Archive(ctx, r.ConfigurationVersionID)
		if err != nil {
			return fmt.Errorf("reading configuration version %s: %w", r.ConfigurationVersionID, err)
		}
		defer rc.Close()
		in.Archive, err = io.ReadAll(rc)
		return err
	})
	side(2, func() error {
		state, stateRun, err := s.o.Sources.State(ctx, r.WorkspaceID)
		if err != nil {
			return fmt.Errorf("reading the current state: %w", err)
		}
		in.State = state
		in.Masks, err = s.previousSecrets(ctx, stateRun, r.ID)
		return err
	})
	side(3, func() (err error) {
		// What a runner uses of the workspace (its name, working
		// directory, project for the variable sets) is its identity:
		// one query, where the effective execution mode would read the
		// project too.
		if in.Workspace, err = s.o.Runs.Workspaces.Identity(ctx, r.WorkspaceID); err != nil {
			return err
		}
		projectID := in.Workspace.ProjectID
		side(6, func() (err error) {
			in.ProjectName, err = s.o.Sources.ProjectName(ctx, projectID)
			return err
		})
		if in.Variables, err = s.o.Sources.Variables(ctx, in.Workspace.Organization, r.WorkspaceID, in.Workspace.ProjectID); err != nil {
			return fmt.Errorf("reading variables: %w", err)
		}
		return nil
	})
	side(4, func() (err error) {
		in.Token, err = s.o.Sources.RunToken(ctx, r.ID)
		return err
	})
	side(7, func() error {
		lim, err := s.o.Sources.Limits(ctx, r.Organization)
		if err != nil {
			return fmt.Errorf("reading the run's limits: %w", err)
		}
		in.PlanTimeout, in.ApplyTimeout, in.OwnPlanTimeout, in.OwnApplyTimeout = lim.Plan, lim.Apply, lim.OwnPlan, lim.OwnApply
		in.NoNewPrivs = !lim.Sudo
		if s.o.Sources.Engine == nil {
			return nil
		}
		if in.Engine, err = s.o.Sources.Engine(ctx, r.TerraformVersion, lim.Beta); err != nil {
			return fmt.Errorf("reading terraform version %s's registration: %w", r.TerraformVersion, err)
		}
		return nil
	})
	if phase == run.PhaseApply {
		side(5, func() (err error) {
			if in.PlanFile, err = s.o.Runs.PlanBlob(ctx, r.Plan.ID, "tfplan"); err != nil {
				return fmt.Errorf("reading the saved plan: %w", err)
			}
			if lock, err := s.o.Runs.PlanBlob(ctx, r.Plan.ID, "lock"); err == nil {
				in.LockFile = lock
			}
			return nil
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	if err := s.identityTokens(ctx, r, in, phase); err != nil {
		return nil, fmt.Errorf("minting workload identity tokens: %w", err)
	}
	return in, nil
}

// identityTokens adds the workload identity tokens of the job's phase to
// its variables (last: a token wins over a variable of its name), each
// valid until the phase's time limit (idtoken.DefaultTTL without one). A
// plan job that may go on to apply (auto-apply, neither a saved plan nor
// plan-only) gets the apply phase's tokens too (ApplyEnv), valid until
// both phases' limits have passed: the apply's subject must say apply, and
// the job does not ask again. Both come from one call.
func (s *Server) identityTokens(ctx context.Context, r *run.Run, in *runner.Inputs, phase run.JobPhase) error {
	if s.o.Sources.IdentityTokens == nil {
		return nil
	}
	limit := func(d time.Duration) time.Duration {
		if d <= 0 {
			return idtoken.DefaultTTL
		}
		return d
	}
	ttls := map[run.JobPhase]time.Duration{run.PhasePlan: limit(in.PlanTimeout)}
	switch {
	case phase == run.PhaseApply:
		ttls = map[run.JobPhase]time.Duration{run.PhaseApply: limit(in.ApplyTimeout)}
	case r.AutoApply && !r.SavePlan && !r.PlanOnly:
		ttls[run.PhaseApply] = limit(in.PlanTimeout) + limit(in.ApplyTimeout)
	}
	toks, err := s.o.Sources.IdentityTokens(ctx, r, in, ttls)
	if err != nil {
		return err
	}
	in.Variables = append(in.Variables, toks[phase]...)
	if phase == run.PhasePlan {
		in.ApplyEnv = toks[run.PhaseApply]
	}
	return nil
}

// previousSecrets returns the sensitive run variables of the run that
// wrote the current state (a stack deployment's previous sensitive
// inputs): terraform may print them as previous values in this run, and
// the state marks only what reached a resource or output as sensitive.
// Nothing when that run is this one or is gone.
func (s *Server) previousSecrets(ctx context.Context, stateRun, runID string) ([]string, error) {
	if stateRun == "" || stateRun == runID {
		return nil, nil
	}
	prev, err := s.o.Runs.System(ctx, stateRun)
	if core.KindOf(err) == core.KindNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading run %s, which wrote the current state: %w", stateRun, err)
	}
	return runner.SensitiveRunValues(prev.Variables), nil
}

func (s *Server) appendLog(w http.ResponseWriter, r *http.Request) error {
	c, err := s.openJob(r, nil, false) // the job's read says its logs
	if err != nil {
		return err
	}
	logID := r.PathValue("log")
	if logID == "" || (logID != c.job.PlanID && logID != c.job.ApplyID) {
		return core.NotFound("log %s is not a log of job %s", logID, c.job.ID)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return err
	}
	if err := s.o.Runs.AppendLog(r.Context(), logID, data); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// saveState stores a state snapshot terraform wrote during an apply.
func (s *Server) saveState(w http.ResponseWriter, r *http.Request) error {
	c, err := s.openJob(r, nil, false) // the job's read says its workspace
	if err != nil {
		return err
	}
	if c.job.Phase != run.PhaseApply {
		return core.Conflict("job %s is not applying: only an apply writes state", c.job.ID)
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return err
	}
	if err := s.o.Sources.SaveState(r.Context(), c.job.WorkspaceID, c.job.RunID, data); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// PlanResponse says whether the runner applies the plan it holds at once.
type PlanResponse struct {
	Continue bool `json:"continue"`
}

func (s *Server) finishPlan(w http.ResponseWriter, r *http.Request) error {
	var res run.PlanResult
	c, err := s.openJob(r, &res, false)
	if core.KindOf(err) == core.KindNotFound {
		respond(w, http.StatusOK, PlanResponse{}) // force-canceled meanwhile: nothing to record
		return nil
	}
	if err != nil {
		return err
	}
	cont, err := s.o.Runs.FinishPlan(r.Context(), c.job.ID, c.runner, res)
	if err != nil {
		return err
	}
	respond(w, http.StatusOK, PlanResponse{Continue: cont})
	return nil
}

// savePlanJSON stores the JSON of a plan reported without it, which the
// runner made while the same job applies.
func (s *Server) savePlanJSON(w http.ResponseWriter, r *http.Request) error {
	var d run.PlanDescription
	c, err := s.openJob(r, &d, false)
	if err != nil {
		return err
	}
	if err := s.o.Runs.SavePlanJSON(r.Context(), c.job.ID, c.runner, d); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) finishApply(w http.ResponseWriter, r *http.Request) error {
	var res run.ApplyResult
	c, err := s.openJob(r, &res, false)
	if core.KindOf(err) == core.KindNotFound {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if err != nil {
		return err
	}
	if err := s.o.Runs.FinishApply(r.Context(), c.job.ID, c.runner, res, stateSink(s.o.Sources.SaveState)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type stateSink func(ctx context.Context, workspaceID, runID string, state []byte) error

func (f stateSink) CreateFromRun(ctx context.Context, workspaceID, runID string, state []byte) error {
	return f(ctx, workspaceID, runID, state)
}
