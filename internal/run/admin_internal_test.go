package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestAdminForceCancelStopsTheRunner: a site administrator's force-cancel
// of a run whose plan a runner executes needs no cancel first (a user's
// force-cancel still does), and does what a user's does: the in-process
// runner is told to stop at once, the job is gone (so an agent's next
// heartbeat hears force too), and the run and its plan end canceled, with
// the administrator's comment as the event's. Nobody else may; a run that
// has ended cannot be; on both stores.
func TestAdminForceCancelStopsTheRunner(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := oneWorkspaceService(t, db, nil)
		r := &Run{ID: "run-f", WorkspaceID: "ws-s", Organization: "acme", ConfigurationVersionID: "cv-s", Status: PlanQueued, Timestamps: Stamps{},
			CreatedAt: core.Now(), Plan: Phase{ID: "plan-f", Status: PhaseQueued, Timestamps: Stamps{}}, Apply: Phase{ID: "apply-f", Timestamps: Stamps{}}}
		if err := insertRun(ctx, db, nil, r); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, created_at, updated_at) VALUES ('job-f', 'run-f', 'plan', 'queued', 'runs', '', 0, 0)`); err != nil {
			t.Fatal(err)
		}
		j, err := s.Claim(ctx, "runner-f")
		if err != nil || j == nil || j.Run.Status != Planning {
			t.Fatalf("claim: %+v, %v", j, err)
		}

		owner := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, UserID: "user-o", Username: "o", Orgs: []string{"acme"}, Owns: []string{"acme"}})
		if err := s.ForceCancel(owner, r.ID, ""); core.KindOf(err) != core.KindConflict {
			t.Fatalf("a user's force-cancel without a cancel first: %v, want a conflict", err)
		}
		if _, err := s.AdminForceCancel(owner, r.ID, ""); err == nil {
			t.Fatal("an organization owner force-canceled through the admin route")
		}
		if got, _ := s.get(ctx, r.ID); got.Status != Planning {
			t.Fatalf("after the refusals the run is %s, want planning", got.Status)
		}

		admin := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, UserID: "user-a", Username: "admin", SiteAdmin: true})
		ended, err := s.AdminForceCancel(admin, r.ID, "stuck since Tuesday")
		if err != nil {
			t.Fatalf("the admin's force-cancel: %v", err)
		}
		if ended.Status != Canceled || ended.Plan.Status != PhaseCanceled || ended.Timestamps["force-canceled-at"].IsZero() {
			t.Fatalf("the run after the admin's force-cancel: %s, plan %s, stamps %v", ended.Status, ended.Plan.Status, ended.Timestamps)
		}
		select {
		case sig := <-j.Signal:
			if sig != SignalForce {
				t.Fatalf("the runner was told %q, want force", sig)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the runner was not told to stop")
		}
		var jobs int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM jobs WHERE run_id = ?`, r.ID).Scan(&jobs); err != nil || jobs != 0 {
			t.Fatalf("the run's jobs after its force-cancel: %d (%v), want none", jobs, err)
		}
		if sig, err := s.Heartbeat(ctx, j.ID, "runner-f"); err != nil || sig != SignalForce {
			t.Fatalf("a heartbeat of the force-canceled job: %q, %v; want force", sig, err)
		}
		events, err := listEvents(ctx, db, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, e := range events {
			found = found || (e.Action == "force_canceled" && e.Description == "stuck since Tuesday" && e.Actor == "user-a")
		}
		if !found {
			t.Fatalf("no force_canceled event with the admin's comment: %+v", events)
		}
		if _, err := s.AdminForceCancel(admin, r.ID, ""); core.KindOf(err) != core.KindConflict {
			t.Fatalf("force-canceling the canceled run again: %v, want a conflict", err)
		}
	})
}
