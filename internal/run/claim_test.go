package run

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// TestClaimReopensARequeuedPlansLog: a claim takes the oldest queued job
// and opens its phase's log; a plan whose runner was lost goes back to
// the queue, and its next claim starts the log again without what the
// lost attempt wrote (a first attempt's log has nothing to clear, so the
// claim skips that statement); on both stores.
func TestClaimReopensARequeuedPlansLog(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		r := &Run{ID: "run-c", WorkspaceID: "ws-c", Organization: "acme", ConfigurationVersionID: "cv-x", Status: PlanQueued, Timestamps: Stamps{},
			CreatedAt: core.Now(), Plan: Phase{ID: "plan-c", Status: PhaseQueued, Timestamps: Stamps{}}, Apply: Phase{ID: "apply-c", Timestamps: Stamps{}}}
		if err := insertRun(ctx, db, nil, r); err != nil {
			t.Fatal(err)
		}
		now := core.Micros(core.Now())
		if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, created_at, updated_at) VALUES ('job-c', 'run-c', 'plan', 'queued', 'runs', '', ?, ?)`, now, now); err != nil {
			t.Fatal(err)
		}
		claim := func(runner string) {
			t.Helper()
			j, err := s.Claim(ctx, runner)
			if err != nil || j == nil || j.ID != "job-c" || j.Run.Status != Planning {
				t.Fatalf("claim by %s: %+v, %v; want job-c, planning", runner, j, err)
			}
			if log, err := s.ReadLog(ctx, "plan-c", 0, 0); err != nil || string(log) != stx {
				t.Fatalf("the plan's log after the claim by %s: %q, %v; want it just opened", runner, log, err)
			}
			if j, err := s.Claim(ctx, "runner-x-idle"); err != nil || j != nil {
				t.Fatalf("a claim with nothing queued: %+v, %v", j, err)
			}
		}
		claim("runner-a-1")
		if err := s.AppendLog(ctx, "plan-c", []byte("output of the lost attempt\n")); err != nil {
			t.Fatal(err)
		}
		if n, err := s.ReapExpired(ctx, "runner-a-", ""); err != nil || n != 1 {
			t.Fatalf("reaping the lost runner's job: %d, %v", n, err)
		}
		if r, err := s.get(ctx, "run-c"); err != nil || r.Status != PlanQueued {
			t.Fatalf("the run after its plan was reaped: %+v, %v; want plan_queued", r, err)
		}
		claim("runner-b-1")
	})
}

// TestHeartbeat: a heartbeat extends its job's lease and answers the
// job's signal; a job its runner no longer holds answers force; on
// PostgreSQL it is one statement (a round trip every heartbeat of every
// job), on both stores.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		r := &Run{ID: "run-h", WorkspaceID: "ws-h", Organization: "acme", ConfigurationVersionID: "cv-x", Status: PlanQueued, Timestamps: Stamps{},
			CreatedAt: core.Now(), Plan: Phase{ID: "plan-h", Status: PhaseQueued, Timestamps: Stamps{}}, Apply: Phase{ID: "apply-h", Timestamps: Stamps{}}}
		if err := insertRun(ctx, db, nil, r); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, created_at, updated_at) VALUES ('job-h', 'run-h', 'plan', 'queued', 'runs', '', 0, 0)`); err != nil {
			t.Fatal(err)
		}
		if j, err := s.Claim(ctx, "runner-h"); err != nil || j == nil {
			t.Fatalf("claim: %+v, %v", j, err)
		}
		if _, err := db.Exec(ctx, `UPDATE jobs SET lease_expires_at = 1 WHERE id = 'job-h'`); err != nil {
			t.Fatal(err)
		}
		before := db.Queries()
		sig, err := s.Heartbeat(ctx, "job-h", "runner-h")
		if err != nil || sig != NoSignal {
			t.Fatalf("heartbeat: %q, %v; want no signal", sig, err)
		}
		want := int64(2)
		if db.Driver().Name() == "postgres" {
			want = 1
		}
		if n := db.Queries() - before; n != want {
			t.Errorf("a heartbeat took %d statements, want %d", n, want)
		}
		var lease int64
		if err := db.QueryRow(ctx, `SELECT lease_expires_at FROM jobs WHERE id = 'job-h'`).Scan(&lease); err != nil || lease <= core.Micros(core.Now()) {
			t.Errorf("the lease after a heartbeat ends at %d (%v), want in the future", lease, err)
		}
		if _, err := db.Exec(ctx, `UPDATE jobs SET signal = ? WHERE id = 'job-h'`, string(SignalCancel)); err != nil {
			t.Fatal(err)
		}
		if sig, err := s.Heartbeat(ctx, "job-h", "runner-h"); err != nil || sig != SignalCancel {
			t.Errorf("heartbeat of a canceled job: %q, %v; want cancel", sig, err)
		}
		if sig, err := s.Heartbeat(ctx, "job-h", "runner-other"); err != nil || sig != SignalForce {
			t.Errorf("heartbeat by a runner not holding the job: %q, %v; want force", sig, err)
		}
	})
}
