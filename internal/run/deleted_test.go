package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// TestReportOfADeletedRunLeavesNoBlobs: a runner's report that read its
// run just before the run's workspace was deleted, and the deletion's
// ledger swept, stores its blobs after them; its commit then finds no job,
// and the report deletes what it stored. (Without that, the plan's log and
// JSON stayed in the blob store for good.)
func TestReportOfADeletedRunLeavesNoBlobs(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		r := &Run{ID: "run-gone", WorkspaceID: "ws-gone", Organization: "acme", ConfigurationVersionID: "cv-x", Status: Planning,
			Timestamps: Stamps{}, PlanOnly: true, CreatedAt: core.Now(), Plan: Phase{ID: "plan-gone"}, Apply: Phase{ID: "apply-gone"}}
		if err := insertRun(ctx, db, nil, r); err != nil {
			t.Fatal(err)
		}
		now := core.Micros(core.Now())
		if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, runner_id, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, 'running', 'runs', '', 'runner-1', ?, ?, ?)`,
			"job-gone", r.ID, string(PhasePlan), core.Micros(core.Now().Add(time.Hour)), now, now); err != nil {
			t.Fatal(err)
		}
		if err := s.startLog(ctx, db, r.Plan.ID, true); err != nil {
			t.Fatal(err)
		}
		s.onReport = func() {
			if err := DeleteWorkspaceRuns(ctx, db, r.WorkspaceID); err != nil {
				t.Error(err)
			}
			if _, err := s.SweepBlobs(ctx); err != nil {
				t.Error(err)
			}
		}
		_, err := s.FinishPlan(ctx, "job-gone", "runner-1", PlanResult{HasChanges: true, Additions: 1, Log: []byte("plan\n"),
			PlanJSON: []byte(`{"resource_changes":[]}`), RedactedJSON: []byte(`{"resource_changes":[]}`)})
		if core.KindOf(err) != core.KindNotFound {
			t.Fatalf("the report of a deleted run: %v, want not found", err)
		}
		for _, k := range []string{logKey(r.Plan.ID), planKey(r.Plan.ID, "json"), planKey(r.Plan.ID, "json-redacted")} {
			if ok, err := s.Blobs.Exists(ctx, k); err != nil || ok {
				t.Errorf("blob %s of the deleted run: exists %v, %v", k, ok, err)
			}
		}
	})
}
