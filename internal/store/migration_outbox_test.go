package store_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestOutboxMigrationMovesRows: migration 0760 moves the rows of the three
// former outboxes (notification deliveries, trigger fan-outs, run task
// requests) into outbox_items, on both stores: what was still to do or
// failed moves with its attempts, claim and error; what was done does not;
// the old tables and columns go.
func TestOutboxMigrationMovesRows(t *testing.T) {
	for _, name := range storetest.Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openUntil(t, name, "0759")
			for _, q := range []string{
				`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-1', 'acme', 'a@acme.test', 1, 1)`,
				`INSERT INTO notification_configurations (id, organization_name, subscribable_type, subscribable_id, name, destination_type, enabled, triggers, email_addresses, email_user_ids, delivery_responses, created_at, updated_at)
				 VALUES ('nc-1', 'acme', 'workspace', 'ws-1', 'hook', 'generic', TRUE, '[]', '[]', '[]', '[]', 1, 1)`,
				`INSERT INTO notification_deliveries (id, configuration_id, trigger_name, body, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at) VALUES
				 ('ncd-pending', 'nc-1', 'run:errored', '{"a":1}', 'pending', 2, 50, '', 'refused', 10, 11),
				 ('ncd-sending', 'nc-1', 'run:errored', '{"b":2}', 'sending', 1, 60, 'notify-r1-x', '', 12, 13),
				 ('ncd-delivered', 'nc-1', 'run:errored', '{}', 'delivered', 1, 0, '', '', 14, 15),
				 ('ncd-failed', 'nc-1', 'run:errored', '{}', 'failed', 20, 0, '', 'gave up', 16, 17)`,
				`INSERT INTO trigger_fanouts (run_id, workspace_id, status, attempts, claimed_by, next_attempt_at, last_error, created_at, updated_at) VALUES
				 ('run-f1', 'ws-1', 'pending', 0, '', 70, '', 20, 21),
				 ('run-f2', 'ws-2', 'claimed', 3, 'trigger-r1-y', 80, 'boom', 22, 23)`,
				`INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, plan_id, apply_id, created_at, updated_at, doc)
				 VALUES ('run-1', 'ws-1', 'acme', 'cv-1', 'planning', FALSE, 'plan-1', 'apply-1', 1, 1, '{}')`,
				`INSERT INTO task_stages (id, run_id, organization_name, workspace_id, stage, status, status_timestamps, created_at, updated_at)
				 VALUES ('ts-1', 'run-1', 'acme', 'ws-1', 'pre_plan', 'running', '{}', 1, 1)`,
				`INSERT INTO task_results (id, stage_id, run_id, task_id, task_name, task_url, workspace_task_id, enforcement_level, status, outcomes, status_timestamps, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at) VALUES
				 ('taskrs-due', 'ts-1', 'run-1', 'task-1', 't', 'https://t', '', 'mandatory', 'pending', '[]', '{}', 1, 90, '', 'refused', 30, 31),
				 ('taskrs-claimed', 'ts-1', 'run-1', 'task-1', 't', 'https://t', '', 'mandatory', 'pending', '[]', '{}', 2, 95, 'runtask-r1-z', '', 32, 33),
				 ('taskrs-unstarted', 'ts-1', 'run-1', 'task-1', 't', 'https://t', '', 'mandatory', 'pending', '[]', '{}', 0, 0, '', '', 34, 35),
				 ('taskrs-running', 'ts-1', 'run-1', 'task-1', 't', 'https://t', '', 'mandatory', 'running', '[]', '{}', 1, 0, '', '', 36, 37)`,
			} {
				if _, err := db.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := store.All(ctx, db, func(sc store.Scanner) (string, error) {
				var topic, key, lane, payload, status, claimed, lastErr string
				var attempts int
				var next, created, updated int64
				err := sc.Scan(&topic, &key, &lane, &payload, &status, &attempts, &next, &claimed, &lastErr, &created, &updated)
				return fmt.Sprintf("%s/%s lane=%s payload=%s %s attempts=%d next=%d by=%s err=%s at=%d,%d",
					topic, key, lane, payload, status, attempts, next, claimed, lastErr, created, updated), err
			}, `SELECT topic, item_key, lane, payload, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at FROM outbox_items`)
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(rows)
			want := []string{
				`notification/ncd-failed lane=nc-1 payload={} failed attempts=20 next=0 by= err=gave up at=16,17`,
				`notification/ncd-pending lane=nc-1 payload={"a":1} pending attempts=2 next=50 by= err=refused at=10,11`,
				`notification/ncd-sending lane=nc-1 payload={"b":2} claimed attempts=1 next=60 by=notify-r1-x err= at=12,13`,
				`run-task/taskrs-claimed lane= payload= claimed attempts=2 next=95 by=runtask-r1-z err= at=32,33`,
				`run-task/taskrs-due lane= payload= pending attempts=1 next=90 by= err=refused at=30,31`,
				`trigger-fan-out/run-f1 lane= payload=ws-1 pending attempts=0 next=70 by= err= at=20,21`,
				`trigger-fan-out/run-f2 lane= payload=ws-2 claimed attempts=3 next=80 by=trigger-r1-y err=boom at=22,23`,
			}
			if got := strings.Join(rows, "\n"); got != strings.Join(want, "\n") {
				t.Fatalf("outbox after the migration:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
			}
			for _, q := range []string{`SELECT COUNT(*) FROM notification_deliveries`, `SELECT COUNT(*) FROM trigger_fanouts`,
				`SELECT COUNT(*) FROM task_results WHERE next_attempt_at > 0`, `SELECT COUNT(*) FROM task_results WHERE claimed_by = ''`} {
				var n int
				if err := db.QueryRow(ctx, q).Scan(&n); err == nil {
					t.Errorf("%s still works after the migration", q)
				}
			}
			var n int
			if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM task_results WHERE status = 'pending'`).Scan(&n); err != nil || n != 3 {
				t.Fatalf("task results kept: %d pending, %v", n, err)
			}
		})
	}
}

// openUntil opens a fresh database of the named store with the migrations
// up to version applied (store.OpenUntil), closed when the test ends.
func openUntil(t *testing.T, name, version string) *store.DB {
	t.Helper()
	db, err := store.OpenUntil(context.Background(), storetest.DSN(t, name), version)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}
