package store_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestWorkspaceCountsMigrationCountsExisting: migration 1043 starts the
// kept workspace counts from the workspaces already stored, on both
// stores (an organization without any has no row, which reads as 0), and
// the triggers count from there.
func TestWorkspaceCountsMigrationCountsExisting(t *testing.T) {
	for _, name := range storetest.Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openUntil(t, name, "1042")
			exec := func(q string) {
				t.Helper()
				if _, err := db.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-1', 'acme', 'a@acme.test', 1, 1), ('org-2', 'beta', 'b@beta.test', 1, 1), ('org-3', 'none', 'n@none.test', 1, 1)`)
			for i := range 3 {
				exec(fmt.Sprintf(`INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES ('ws-a%d', 'acme', 'prj-1', 'a%d', 1, 1)`, i, i))
			}
			exec(`INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES ('ws-b0', 'beta', 'prj-2', 'b0', 1, 1)`)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			counts := func() string {
				t.Helper()
				rows, err := store.Pairs(ctx, db, `SELECT organization_name, CAST(workspaces AS TEXT) FROM workspace_counts ORDER BY organization_name`)
				if err != nil {
					t.Fatal(err)
				}
				var out []string
				for _, r := range rows {
					out = append(out, r[0]+"="+r[1])
				}
				return strings.Join(out, " ")
			}
			if got := counts(); got != "acme=3 beta=1" {
				t.Fatalf("after the migration: %q, want %q", got, "acme=3 beta=1")
			}
			exec(`INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES ('ws-n0', 'none', 'prj-3', 'n0', 1, 1)`)
			exec(`DELETE FROM workspaces WHERE id = 'ws-a0'`)
			if got := counts(); got != "acme=2 beta=1 none=1" {
				t.Fatalf("after an insert and a delete: %q, want %q", got, "acme=2 beta=1 none=1")
			}
		})
	}
}
