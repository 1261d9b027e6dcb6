package stack

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestDeploymentRunsBesideOtherWork: a change to a deployment's runs whose
// transaction overlaps another's that changes the same runs acts on what
// that other transaction committed. Each case failed on PostgreSQL before
// its fix (2026-11-30), where the runs were read unlocked: the lock was
// given to a run canceled meanwhile (and the deployment stayed locked for
// good); the approval of a newer configuration's run abandoned the plan
// step of an older run approved meanwhile, and discarded its saved plan.
// The loop's end of a step, written outside any transaction, wrote a step
// that Cancel abandoned meanwhile back completed or failed (on both
// stores: its read did not wait for the cancel).
// Both stores; SQLite's transactions never overlap.
func TestDeploymentRunsBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"the lock: the run is canceled",
		"an approval: an older run is approved",
		"a step's end: the run is canceled",
		"a step's failure: the run is canceled",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { runsBeside(t, db, name) })
		})
	}
}

func runsBeside(t *testing.T, db *store.DB, name string) {
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
	s := &Service{db: db, wake: loops.NewWake(), busySince: map[string]time.Time{}}
	now := core.Micros(nowUTC())
	seedDeployment(t, db, now)
	// mk makes a run of configuration cfg at status, with a plan step
	// waiting for an operator when the run is.
	mk := func(id, cfg string, status RunStatus) *DeploymentRun {
		t.Helper()
		r := &DeploymentRun{ID: id, StackID: "st-1", ConfigurationID: cfg, Deployment: "prod", Status: status, Mode: ModeNormal,
			Timestamps: map[string]time.Time{}, CreatedAt: nowUTC(), UpdatedAt: nowUTC()}
		if status == RunAcquiringLock {
			r.ApprovedAt = nowUTC()
		}
		if err := insertRun(ctx, db, r); err != nil {
			t.Fatal(err)
		}
		if status == RunPreDeployingPendingOperator {
			st := &Step{ID: "sds-" + id, RunID: id, Operation: OpPlan, Status: StepPendingOperator, TFERunID: "run-" + id,
				Timestamps: map[string]time.Time{}, CreatedAt: nowUTC(), UpdatedAt: nowUTC()}
			if err := insertStep(ctx, db, st); err != nil {
				t.Fatal(err)
			}
		}
		r, err := loadRun(ctx, db, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	// beside runs change in a transaction held open once it has
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change func(tx *store.Tx) error, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, change, act)
	}
	status := func(t *testing.T, id string) RunStatus {
		t.Helper()
		r, err := loadRun(ctx, db, id, false)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}

	// cancel is Cancel's change.
	cancel := func(id string) func(tx *store.Tx) error {
		return func(tx *store.Tx) error {
			cur, err := loadRun(ctx, tx, id, true)
			if err != nil {
				return err
			}
			return s.abandon(ctx, tx, cur)
		}
	}

	switch name {
	case "a step's end: the run is canceled", "a step's failure: the run is canceled":
		// The loop read the run deploying and its apply step running; the
		// step's terraform run has ended (well, or not).
		r := mk("sdr-1", "stc-2", RunDeploying)
		st := &Step{ID: "sds-1", RunID: r.ID, Operation: OpApply, Status: StepRunning, TFERunID: "run-1",
			Timestamps: map[string]time.Time{}, CreatedAt: nowUTC(), UpdatedAt: nowUTC()}
		if err := insertStep(ctx, db, st); err != nil {
			t.Fatal(err)
		}
		ok := name == "a step's end: the run is canceled"
		s.exec = endedRun{rep: RunReport{Status: "applied", Final: true, OK: ok}}
		err := beside(t, cancel(r.ID), func() error { return s.watch(ctx, r, st) })
		if err != nil {
			t.Fatalf("ending the step beside the cancel: %v", err)
		}
		steps, err := runSteps(ctx, db, r.ID)
		if err != nil || len(steps) != 1 {
			t.Fatalf("the run's steps: %v, %v", steps, err)
		}
		if got := status(t, r.ID); got != RunAbandoned || steps[0].Status != StepAbandoned {
			t.Fatalf("the run canceled while its step ended is %s, its step %s; want both abandoned", got, steps[0].Status)
		}

	case "the lock: the run is canceled":
		r := mk("sdr-1", "stc-2", RunAcquiringLock) // as the loop read it
		err := beside(t, func(tx *store.Tx) error { // Cancel's change
			cur, err := loadRun(ctx, tx, r.ID, true)
			if err != nil {
				return err
			}
			return s.abandon(ctx, tx, cur)
		}, func() error { return s.acquire(ctx, r) })
		if err != nil {
			t.Fatalf("acquiring the lock beside the cancel: %v", err)
		}
		var holder string
		if err := db.QueryRow(ctx, `SELECT lock_run_id FROM stack_deployments WHERE id = 'sdep-1'`).Scan(&holder); err != nil {
			t.Fatal(err)
		}
		if got := status(t, r.ID); got != RunAbandoned || holder != "" {
			t.Fatalf("the run canceled while it took the lock is %s and the deployment is locked by %q, want abandoned and unlocked", got, holder)
		}

	case "an approval: an older run is approved":
		older := mk("sdr-older", "stc-1", RunPreDeployingPendingOperator)
		newer := mk("sdr-newer", "stc-2", RunPreDeployingPendingOperator)
		err := beside(t, func(tx *store.Tx) error { return s.approveIn(ctx, tx, older.ID) },
			func() error { return s.Approve(ctx, newer.ID) })
		if err != nil {
			t.Fatalf("approving the newer run beside the older's approval: %v", err)
		}
		st, err := runSteps(ctx, db, older.ID)
		if err != nil || len(st) != 1 {
			t.Fatalf("the older run's steps: %v, %v", st, err)
		}
		var release string
		if err := db.QueryRow(ctx, `SELECT release_run FROM stack_deployment_steps WHERE id = ?`, st[0].ID).Scan(&release); err != nil {
			t.Fatal(err)
		}
		if got := status(t, older.ID); got != RunAcquiringLock || st[0].Status != StepCompleted || release != "" {
			t.Fatalf("the older run approved beside the newer's approval is %s, its plan step %s (saved plan to discard: %q); want %s, %s and its plan kept",
				got, st[0].Status, release, RunAcquiringLock, StepCompleted)
		}
		if got := status(t, newer.ID); got != RunAcquiringLock {
			t.Fatalf("the newer run is %s, want %s", got, RunAcquiringLock)
		}
	}
}

// endedRun is an executor whose runs have all ended as rep says (and
// that does nothing else).
type endedRun struct {
	Executor
	rep RunReport
}

func (e endedRun) Status(context.Context, string, string) (RunReport, error) { return e.rep, nil }
