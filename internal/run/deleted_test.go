package run

import (
	"context"
	"testing"

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
		r := addLaterRun(ctx, t, db, "gone", Planning, false, PhasePlan)
		if err := s.startLog(ctx, db, r.Plan.ID, true); err != nil {
			t.Fatal(err)
		}
		s.onReport = func() {
			if err := DeleteWorkspaceRuns(ctx, db, r.WorkspaceID); err != nil {
				t.Error(err)
			}
			if _, err := s.Ledger().Sweep(ctx); err != nil {
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
