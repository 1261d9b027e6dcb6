package stack

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestLockInApprovalOrder checks the deployment lock on both stores: of
// two approved runs of one deployment only the first approved takes the
// lock; the second waits until the first ends, then takes it. The
// deploying periods (deploying-at to the end) never overlap.
func TestLockInApprovalOrder(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Service{db: db}
		now := core.Micros(nowUTC())
		seedDeployment(t, db, now)
		// The newer configuration's run was approved first.
		mk := func(id, cfg string, approved time.Time) *DeploymentRun {
			r := &DeploymentRun{ID: id, StackID: "st-1", ConfigurationID: cfg, Deployment: "prod", Status: RunAcquiringLock, Mode: ModeNormal,
				Timestamps: map[string]time.Time{}, ApprovedAt: approved, CreatedAt: nowUTC(), UpdatedAt: nowUTC()}
			if err := insertRun(ctx, db, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		later := mk("sdr-later", "stc-1", nowUTC().Add(time.Second))
		first := mk("sdr-first", "stc-2", nowUTC())
		reload := func(id string) *DeploymentRun {
			r, err := loadRun(ctx, db, id, false)
			if err != nil {
				t.Fatal(err)
			}
			return r
		}
		for _, r := range []*DeploymentRun{later, first, reload("sdr-later")} {
			if err := s.acquire(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if a, b := reload("sdr-first"), reload("sdr-later"); a.Status != RunDeploying || b.Status != RunAcquiringLock {
			t.Fatalf("after acquiring: first %s, later %s", a.Status, b.Status)
		}
		var holder string
		if err := db.QueryRow(ctx, `SELECT lock_run_id FROM stack_deployments WHERE id = 'sdep-1'`).Scan(&holder); err != nil || holder != "sdr-first" {
			t.Fatalf("lock holder = %q, %v", holder, err)
		}
		if err := s.finish(ctx, reload("sdr-first"), RunSucceeded, ""); err != nil {
			t.Fatal(err)
		}
		if err := s.acquire(ctx, reload("sdr-later")); err != nil {
			t.Fatal(err)
		}
		a, b := reload("sdr-first"), reload("sdr-later")
		if b.Status != RunDeploying {
			t.Fatalf("later run after the first ended: %s", b.Status)
		}
		if end, start := a.Timestamps["succeeded-at"], b.Timestamps["deploying-at"]; start.Before(end) {
			t.Errorf("the later run deployed at %v, before the first ended at %v", start, end)
		}
	})
}

// seedDeployment stores organization acme, its stack st-1 with two
// completed configurations (stc-1, stc-2) and the stack's deployment
// "prod" (sdep-1, last configured by stc-2).
func seedDeployment(t *testing.T, db *store.DB, now int64) {
	t.Helper()
	storetest.Seed(t, db,
		[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-1', 'acme', 'a@acme.test', ?, ?)`, now, now},
		[]any{`INSERT INTO projects (id, organization_name, name, created_at, updated_at) VALUES ('prj-1', 'acme', 'p', ?, ?)`, now, now},
		[]any{`INSERT INTO stacks (id, organization_name, project_id, name, created_at, updated_at) VALUES ('st-1', 'acme', 'prj-1', 's', ?, ?)`, now, now},
		[]any{`INSERT INTO stack_configurations (id, stack_id, sequence_number, status, source, created_at, updated_at) VALUES ('stc-1', 'st-1', 1, 'completed', 'manual', ?, ?)`, now, now},
		[]any{`INSERT INTO stack_configurations (id, stack_id, sequence_number, status, source, created_at, updated_at) VALUES ('stc-2', 'st-1', 2, 'completed', 'manual', ?, ?)`, now, now},
		[]any{`INSERT INTO stack_deployments (id, stack_id, name, last_configuration_id, created_at, updated_at) VALUES ('sdep-1', 'st-1', 'prod', 'stc-2', ?, ?)`, now, now},
	)
}
