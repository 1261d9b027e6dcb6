package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// TestPlanJSONMadeBesideTheApply covers a plan reported without its JSON
// that the runner makes while the same job applies (a CLI-driven run; see
// TestPlanJSONMadeAfterTheApply for the others): a read asked before
// the upload waits for it and gets the JSON, not an empty answer; the
// upload is for the job's own runner only and its counts win over the
// summary line's; a read after the job ended without an upload is 204
// (NotFound), and a read that waits too long is told to retry (429).
func TestPlanJSONMadeBesideTheApply(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		add := func(id string, st Status, later bool) *Run {
			return addLaterRun(ctx, t, db, id, st, later, PhaseApply)
		}
		desc := PlanDescription{PlanJSON: []byte(`{"plan":1}`), RedactedJSON: []byte(`{"redacted":1}`), Additions: 3, Destructions: 1}

		r := add("run-1", Applying, true)
		waiting, read := waitingReads(ctx, s)
		got := read(r)
		<-waiting // the read found no JSON and waits for it
		if err := s.SavePlanJSON(ctx, "job-run-1", "runner-2", desc); core.KindOf(err) != core.KindConflict {
			t.Fatalf("another runner's upload: %v, want a conflict", err)
		}
		if err := s.SavePlanJSON(ctx, "job-run-1", "runner-1", PlanDescription{PlanJSON: desc.PlanJSON}); core.KindOf(err) != core.KindInvalid {
			t.Fatalf("an upload without the redacted JSON: %v, want invalid", err)
		}
		if err := s.SavePlanJSON(ctx, "job-run-1", "runner-1", desc); err != nil {
			t.Fatal(err)
		}
		if a := <-got; a.err != nil || string(a.b) != `{"redacted":1}` {
			t.Fatalf("the waiting read: %q, %v", a.b, a.err)
		}
		if b, err := s.PlanJSON(ctx, r, "json"); err != nil || string(b) != `{"plan":1}` {
			t.Fatalf("the plan JSON: %q, %v", b, err)
		}
		if r, err := s.get(ctx, "run-1"); err != nil || r.Plan.Additions != 3 || r.Plan.Destructions != 1 {
			t.Fatalf("the plan's counts after the upload: %+v, %v (want the JSON's 3 added, 1 destroyed)", r.Plan, err)
		}

		// A plan reported with its JSON takes no upload.
		add("run-2", Applying, false)
		if err := s.SavePlanJSON(ctx, "job-run-2", "runner-1", desc); core.KindOf(err) != core.KindConflict {
			t.Fatalf("an upload nothing waits for: %v, want a conflict", err)
		}

		// The job ended without an upload: nothing comes any more.
		r3 := add("run-3", Errored, true)
		if _, err := s.PlanJSON(ctx, r3, "json-redacted"); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("JSON of a run past applying that never got it: %v, want not found (204)", err)
		}

		// A read that waits longer than the bound is told to retry.
		r4 := add("run-4", Applying, true)
		s.planJSONWait = 0
		if _, err := s.PlanJSON(ctx, r4, "json"); core.KindOf(err) != core.KindTooManyRequests {
			t.Fatalf("a read past the wait: %v, want too many requests (retry)", err)
		}
		s.planJSONWait = time.Minute
	})
}

type jsonAnswer struct {
	b   []byte
	err error
}

// waitingReads makes s signal waiting each time a read of a plan JSON
// waits for it; read reads a run's redacted plan JSON in the background.
func waitingReads(ctx context.Context, s *Service) (waiting chan struct{}, read func(r *Run) chan jsonAnswer) {
	waiting = make(chan struct{}, 1)
	s.onPlanJSONWait = func() {
		select {
		case waiting <- struct{}{}:
		default:
		}
	}
	return waiting, func(r *Run) chan jsonAnswer {
		got := make(chan jsonAnswer, 1)
		go func() {
			b, err := s.PlanJSON(ctx, r, "json-redacted")
			got <- jsonAnswer{b, err}
		}()
		return got
	}
}

// addLaterRun stores an auto-applied run and its job (held by runner-1 in
// phase), for tests of a runner's reports.
func addLaterRun(ctx context.Context, t *testing.T, db *store.DB, id string, st Status, later bool, phase JobPhase) *Run {
	t.Helper()
	r := &Run{ID: id, WorkspaceID: "ws-a", Organization: "acme", ConfigurationVersionID: "cv-x", Status: st, Timestamps: Stamps{},
		AutoApply: true, PlanJSONLater: later, CreatedAt: core.Now(),
		Plan: Phase{ID: "plan-" + id, Additions: 2, HasChanges: true}, Apply: Phase{ID: "apply-" + id}}
	if err := insertRun(ctx, db, nil, r); err != nil {
		t.Fatal(err)
	}
	now := core.Micros(core.Now())
	if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, runner_id, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, 'running', 'runs', '', 'runner-1', ?, ?, ?)`,
		"job-"+id, id, string(phase), core.Micros(core.Now().Add(time.Hour)), now, now); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestPlanJSONMadeAfterTheApply: the job of a run whose plan was reported
// without its JSON reports the apply first: the run is applied and
// releases the workspace while the job stays, in PhasePlanJSON, to make
// the JSON. A read in that window waits for the upload and gets the JSON;
// the upload ends the job. A job that says it could not make the JSON,
// or that is reaped after its runner died, ends the wait with 204
// (NotFound), never a wait without end.
func TestPlanJSONMadeAfterTheApply(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		jobs := func(runID string) (phase string, n int) {
			t.Helper()
			rows, err := db.Query(ctx, `SELECT phase FROM jobs WHERE run_id = ?`, runID)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			for rows.Next() {
				if err := rows.Scan(&phase); err != nil {
					t.Fatal(err)
				}
				n++
			}
			return phase, n
		}
		waiting, read := waitingReads(ctx, s)

		// The apply was reported (FinishApply; the e2e test
		// TestAutoApplyPlanJSONMadeAfterApply goes through it): the run is
		// applied, its job in PhasePlanJSON.
		r := addLaterRun(ctx, t, db, "run-1", Applied, true, PhasePlanJSON)
		got := read(r)
		<-waiting // an applied run whose JSON is on its way: the read waits
		desc := PlanDescription{PlanJSON: []byte(`{"plan":1}`), RedactedJSON: []byte(`{"redacted":1}`), Additions: 2}
		if err := s.SavePlanJSON(ctx, "job-run-1", "runner-2", desc); core.KindOf(err) != core.KindConflict {
			t.Fatalf("another runner's upload: %v, want a conflict", err)
		}
		if err := s.SavePlanJSON(ctx, "job-run-1", "runner-1", desc); err != nil {
			t.Fatal(err)
		}
		if a := <-got; a.err != nil || string(a.b) != `{"redacted":1}` {
			t.Fatalf("the waiting read: %q, %v", a.b, a.err)
		}
		if _, n := jobs("run-1"); n != 0 {
			t.Fatalf("the upload left %d jobs of the run, want none", n)
		}

		// The runner could not make the JSON and says so.
		r2 := addLaterRun(ctx, t, db, "run-2", Applied, true, PhasePlanJSON)
		got = read(r2)
		<-waiting
		if err := s.SavePlanJSON(ctx, "job-run-2", "runner-1", PlanDescription{Error: "show -json failed"}); err != nil {
			t.Fatal(err)
		}
		if a := <-got; core.KindOf(a.err) != core.KindNotFound {
			t.Fatalf("a read of JSON that could not be made: %q, %v (want not found, 204)", a.b, a.err)
		}
		if _, n := jobs("run-2"); n != 0 {
			t.Fatalf("the error report left %d jobs of the run, want none", n)
		}

		// The runner died after the apply: the reaper ends the job and
		// the waiting read.
		r3 := addLaterRun(ctx, t, db, "run-3", Applied, true, PhasePlanJSON)
		got = read(r3)
		<-waiting
		if _, err := db.Exec(ctx, `UPDATE jobs SET lease_expires_at = 1 WHERE id = ?`, "job-run-3"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.ReapExpired(ctx, "", ""); err != nil || n != 1 {
			t.Fatalf("reaping the lost job: %d, %v (want 1)", n, err)
		}
		if a := <-got; core.KindOf(a.err) != core.KindNotFound {
			t.Fatalf("a read of JSON whose job was lost: %q, %v (want not found, 204)", a.b, a.err)
		}
		if cur, err := s.get(ctx, "run-3"); err != nil || cur.Status != Applied || cur.PlanJSONLater {
			t.Fatalf("the run after its lost job was reaped: %+v, %v (want applied, nothing pending)", cur, err)
		}
	})
}
