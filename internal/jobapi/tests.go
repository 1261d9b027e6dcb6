package jobapi

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/run"
)

// Module test runs on agents. An agent that says it runs them
// (FeatureModuleTests) may get one from its claim instead of a run job:
// a test run of a module whose tests run on the agent's pool. It runs it
// in the slot the claim was made for (moduletest.Execute: terraform init
// and terraform test), heartbeating, streaming the log and reporting the
// outcome through the calls below, each of which checks that the caller
// is an agent of the run's pool and holds the run.

// FeatureModuleTests says the runner runs module test runs (FeaturesHeader).
const FeatureModuleTests = "module-tests"

// TestJob is a claimed module test run on the wire: what
// moduletest.Work needs besides the calls below.
type TestJob struct {
	ID           string                `json:"id"`
	Organization string                `json:"organization"`
	Options      moduletest.RunOptions `json:"options"`
	// Variables are the run's -var values.
	Variables []moduletest.Variable `json:"variables"`
	// Inputs are the module's test variables, the run's registry
	// credentials for the server and the organization's sudo setting.
	moduletest.Inputs
	// LeaseMS is the test run's lease: the agent heartbeats well within.
	LeaseMS int64 `json:"lease_ms"`
}

// TestHeartbeatResponse answers a test run's heartbeat: its signal, and
// whether the run is still the caller's (when not, it stops, reporting
// nothing).
type TestHeartbeatResponse struct {
	Signal moduletest.Signal `json:"signal"`
	Held   bool              `json:"held"`
}

func (s *Server) registerTests(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/agent/tests/{id}/heartbeat", s.handle(s.testHeartbeat))
	mux.HandleFunc("GET /api/agent/tests/{id}/configuration", s.handle(s.testConfiguration))
	mux.HandleFunc("POST /api/agent/tests/{id}/logs", s.handle(s.testLog))
	mux.HandleFunc("POST /api/agent/tests/{id}/finish", s.handle(s.testFinish))
}

// runsTests says whether the caller of a claim gets test runs: an agent
// that runs them, on a server that has them.
func (s *Server) runsTests(r *http.Request) bool {
	p := auth.FromContext(r.Context())
	return s.o.Tests != nil && p != nil && p.Kind == auth.KindAgent && hasFeature(r, FeatureModuleTests)
}

// claimTest takes a queued test run of pool for the agent runnerID and
// gathers its job; nil when none is queued. A run whose job cannot be
// gathered ends errored (it is the agent's by then).
func (s *Server) claimTest(ctx context.Context, runnerID, pool string) (*Job, error) {
	tr, err := s.o.Tests.ClaimForAgent(ctx, runnerID, pool)
	if err != nil || tr == nil {
		return nil, err
	}
	tj, err := s.testJob(ctx, tr)
	if err != nil {
		o := moduletest.Outcome{Status: moduletest.StatusErrored, Verdict: moduletest.TestError,
			Tail: fmt.Sprintf("\nError: preparing the test run for its agent: %v\n", err)}
		if ferr := s.o.Tests.Finish(context.WithoutCancel(ctx), tr.ID, runnerID, o); ferr != nil {
			s.o.Logger.Warn("ending a test run that could not be prepared", "test_run", tr.ID, "error", ferr)
		}
		return nil, err
	}
	if err := s.o.Agents.SetStatus(ctx, runnerID, "busy"); err != nil {
		s.o.Logger.Warn("recording an agent's status", "agent", runnerID, "error", err)
	}
	return &Job{ID: tr.ID, LeaseMS: tj.LeaseMS, Test: tj}, nil
}

func (s *Server) testJob(ctx context.Context, tr *moduletest.TestRun) (*TestJob, error) {
	in, err := s.o.Tests.Inputs(ctx, tr)
	if err != nil {
		return nil, err
	}
	return &TestJob{ID: tr.ID, Organization: tr.Organization, Options: tr.Options, Variables: tr.Variables, Inputs: *in,
		LeaseMS: s.o.Tests.LeaseTTL.Milliseconds()}, nil
}

// openTest checks that the caller is an agent of the pool of the test
// run the path names, and holds it.
func (s *Server) openTest(r *http.Request) (*moduletest.TestRun, string, error) {
	ctx := r.Context()
	if s.o.Tests == nil {
		return nil, "", core.NotFound("this server runs no module tests")
	}
	if p := auth.FromContext(ctx); p == nil || p.Kind != auth.KindAgent {
		return nil, "", core.Forbidden("only agents run module tests through the job protocol")
	}
	pool, err := poolOf(ctx)
	if err != nil {
		return nil, "", err
	}
	runnerID, err := s.runnerOf(r)
	if err != nil {
		return nil, "", err
	}
	tr, err := s.o.Tests.Held(ctx, r.PathValue("id"), runnerID, pool)
	return tr, runnerID, err
}

func (s *Server) testHeartbeat(w http.ResponseWriter, r *http.Request) error {
	tr, runnerID, err := s.openTest(r)
	if k := core.KindOf(err); k == core.KindNotFound || k == core.KindConflict {
		respond(w, http.StatusOK, TestHeartbeatResponse{}) // ended, reaped or deleted: stop
		return nil
	}
	if err != nil {
		return err
	}
	sig, held, err := s.o.Tests.Heartbeat(r.Context(), tr.ID, runnerID)
	if err != nil {
		return err
	}
	if held {
		if err := s.o.Agents.SetStatus(r.Context(), runnerID, "busy"); err != nil {
			s.o.Logger.Warn("recording an agent's status", "agent", runnerID, "error", err)
		}
	}
	respond(w, http.StatusOK, TestHeartbeatResponse{Signal: sig, Held: held})
	return nil
}

func (s *Server) testConfiguration(w http.ResponseWriter, r *http.Request) error {
	tr, _, err := s.openTest(r)
	if err != nil {
		return err
	}
	rc, err := s.o.Tests.Configuration(r.Context(), tr)
	if err != nil {
		return err
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/gzip")
	_, _ = io.Copy(w, rc)
	return nil
}

func (s *Server) testLog(w http.ResponseWriter, r *http.Request) error {
	tr, _, err := s.openTest(r)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		return err
	}
	if err := s.o.Tests.AppendLog(r.Context(), tr.ID, data); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) testFinish(w http.ResponseWriter, r *http.Request) error {
	var o moduletest.Outcome
	if err := decode(r, &o); err != nil {
		return err
	}
	tr, runnerID, err := s.openTest(r)
	if err != nil {
		return err
	}
	if err := s.o.Tests.Finish(r.Context(), tr.ID, runnerID, o); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// The agent's side.

// agentRunner is the runner's protocol for an agent: the client's, with
// claims that may bring a module test run, which it runs to its end in
// the claiming slot before it claims again.
type agentRunner struct {
	*Client
	exec moduletest.ExecConfig
	log  *slog.Logger
}

func (a *agentRunner) Claim(ctx context.Context, runnerID string) (*run.Job, error) {
	job, err := a.claim(ctx)
	if err != nil || job == nil {
		return nil, err
	}
	if job.Test == nil {
		return a.runJob(job), nil
	}
	// A draining agent finishes the test run it took, as it does a job.
	a.runTest(context.WithoutCancel(ctx), job.Test)
	return nil, nil
}

// runTest runs a claimed test run and reports its outcome.
func (a *agentRunner) runTest(ctx context.Context, tj *TestJob) {
	log := a.log.With("test_run", tj.ID)
	log.Info("running a module test run")
	base := "/api/agent/tests/" + tj.ID
	cfg := a.exec
	lease := time.Duration(tj.LeaseMS) * time.Millisecond
	cfg.Heartbeat = min(2*time.Second, max(lease/3, 100*time.Millisecond))
	w := &moduletest.Work{
		Run:    &moduletest.TestRun{ID: tj.ID, Organization: tj.Organization, Options: tj.Options, Variables: tj.Variables},
		Inputs: tj.Inputs,
		Configuration: func(ctx context.Context) (io.ReadCloser, error) {
			return a.stream(ctx, http.MethodGet, base+"/configuration")
		},
		Heartbeat: func(ctx context.Context) (moduletest.Signal, bool, error) {
			var out TestHeartbeatResponse
			_, err := a.call(ctx, http.MethodPost, base+"/heartbeat", struct{}{}, &out)
			return out.Signal, out.Held || err != nil, err
		},
		Log: testLogs{a.Client, base + "/logs"},
	}
	o := moduletest.Execute(ctx, cfg, w, log)
	if o.Status == "" {
		log.Warn("the test run was taken from this agent (ended on the server, or its lease lost): nothing to report")
		return
	}
	if _, err := a.call(ctx, http.MethodPost, base+"/finish", o, nil); err != nil {
		log.Error("reporting a test run's outcome", "error", err)
		return
	}
	log.Info("test run ended", "status", o.Status, "tests", o.Verdict)
}

// testLogs ships a test run's log chunks.
type testLogs struct {
	c    *Client
	path string
}

func (l testLogs) AppendLog(ctx context.Context, _, _ string, data []byte) error {
	_, err := l.c.do(ctx, http.MethodPost, l.path, bytes.NewReader(data), "application/octet-stream", nil)
	return err
}
