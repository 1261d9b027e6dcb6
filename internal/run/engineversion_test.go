package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// queuePlan inserts a run of org waiting for its plan, with the plan's
// job queued, created at at (so that claims take runs in that order).
func queuePlan(t *testing.T, db *store.DB, id, org string, at time.Time, edit func(*Run)) {
	t.Helper()
	ctx := context.Background()
	r := &Run{ID: id, WorkspaceID: "ws-" + id, Organization: org, ConfigurationVersionID: "cv-x", Status: PlanQueued, Timestamps: Stamps{},
		CreatedAt: at, Plan: Phase{ID: "plan-" + id, Status: PhaseQueued, Timestamps: Stamps{}}, Apply: Phase{ID: "apply-" + id, Timestamps: Stamps{}}}
	if edit != nil {
		edit(r)
	}
	if err := insertRun(ctx, db, nil, r); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, created_at, updated_at) VALUES (?, ?, 'plan', 'queued', 'runs', '', ?, ?)`,
		"job-"+id, id, core.Micros(at), core.Micros(at)); err != nil {
		t.Fatal(err)
	}
}

// TestPlanRecordsItsEngineVersion: a run that names no exact version
// ("latest", none, a constraint) records the exact version its plan ran
// with as its own, so that its apply, on any runner and after any new
// registration, uses the same; a run that names one keeps it, and what
// is not a version is not recorded. On both stores.
func TestPlanRecordsItsEngineVersion(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		s := oneWorkspaceService(t, db, nil)
		ctx := context.Background()
		cases := []struct{ id, named, reported, want string }{
			{"run-latest", "latest", "1.10.2", "1.10.2"},
			{"run-none", "", "1.10.2", "1.10.2"},
			{"run-constraint", "~> 1.10.0", "1.10.2", "1.10.2"},
			{"run-tofu", "tofu", "tofu:1.8.0", "tofu:1.8.0"},
			{"run-exact", "1.9.5", "1.10.2", "1.9.5"},
			{"run-unreported", "latest", "", "latest"},
			{"run-garbage", "latest", "1.10.2; rm -rf /", "latest"},
		}
		at := core.Now().Add(-time.Minute)
		for i, c := range cases {
			queuePlan(t, db, c.id, "acme", at.Add(time.Duration(i)*time.Second), func(r *Run) { r.TerraformVersion = c.named })
		}
		for _, c := range cases {
			j, err := s.Claim(ctx, "runner-1")
			if err != nil || j == nil || j.RunID != c.id {
				t.Fatalf("claimed %+v, %v; want %s's plan", j, err, c.id)
			}
			if _, err := s.FinishPlan(ctx, j.ID, "runner-1", PlanResult{EngineVersion: c.reported}); err != nil {
				t.Fatal(err)
			}
			r, err := s.get(ctx, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if r.TerraformVersion != c.want || r.Status != PlannedAndFinished {
				t.Errorf("%s (%q, the plan ran with %q): version %q, status %s; want %q", c.id, c.named, c.reported, r.TerraformVersion, r.Status, c.want)
			}
		}
	})
}
