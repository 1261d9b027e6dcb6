package store_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestStackManagedWorkspacesMigration: migration 1115 marks the workspaces
// stack deployments already have as their stack's ("managed-by" in the
// settings document, which stays valid JSON with every other setting
// kept), and no other workspace, on both stores.
func TestStackManagedWorkspacesMigration(t *testing.T) {
	for _, name := range storetest.Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openUntil(t, name, "1114")
			exec := func(q string) {
				t.Helper()
				if _, err := db.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-1', 'acme', 'a@acme.test', 1, 1)`)
			exec(`INSERT INTO projects (id, organization_name, name, created_at, updated_at) VALUES ('prj-1', 'acme', 'p', 1, 1)`)
			exec(`INSERT INTO stacks (id, organization_name, project_id, name, created_at, updated_at) VALUES ('st-1', 'acme', 'prj-1', 'web', 1, 1)`)
			exec(`INSERT INTO workspaces (id, organization_name, project_id, name, attrs, created_at, updated_at) VALUES
				('ws-1', 'acme', 'prj-1', 'stack-st-1-prod', '{"description":"State of a stack deployment","auto-apply":false}', 1, 1),
				('ws-2', 'acme', 'prj-1', 'own', '{"description":"mine","auto-apply":true}', 1, 1),
				('ws-3', 'acme', 'prj-1', 'stack-st-1-dev', '{"description":""}', 1, 1)`)
			exec(`INSERT INTO stack_deployments (id, stack_id, name, last_configuration_id, workspace_id, created_at, updated_at) VALUES
				('sd-1', 'st-1', 'prod', 'stc-1', 'ws-1', 1, 1), ('sd-2', 'st-1', 'dev', 'stc-1', 'ws-3', 1, 1), ('sd-3', 'st-1', 'qa', 'stc-1', '', 1, 1)`)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := store.Pairs(ctx, db, `SELECT id, attrs FROM workspaces ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]any{
				"ws-1": {"managed-by": "st-1", "description": "State of a stack deployment", "auto-apply": false},
				"ws-2": {"description": "mine", "auto-apply": true},
				"ws-3": {"managed-by": "st-1", "description": ""},
			}
			for _, r := range rows {
				var got map[string]any
				if err := json.Unmarshal([]byte(r[1]), &got); err != nil {
					t.Fatalf("%s's settings after the migration are no JSON: %q (%v)", r[0], r[1], err)
				}
				b1, _ := json.Marshal(got)
				b2, _ := json.Marshal(want[r[0]])
				if string(b1) != string(b2) {
					t.Errorf("%s's settings after the migration: %s, want %s", r[0], b1, b2)
				}
			}
		})
	}
}
