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
