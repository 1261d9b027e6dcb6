package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestWorkspaceTerraformVersionMigration: migration 1085 copies each
// workspace's terraform version out of its settings into the
// terraform_version column, a leading "v" dropped and "latest" for a
// workspace whose settings name none, on both stores.
func TestWorkspaceTerraformVersionMigration(t *testing.T) {
	for _, name := range storetest.Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := openUntil(t, name, "1084")
			exec := func(q string) {
				t.Helper()
				if _, err := db.Exec(ctx, q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}
			exec(`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-1', 'acme', 'a@acme.test', 1, 1)`)
			exec(`INSERT INTO workspaces (id, organization_name, project_id, name, attrs, created_at, updated_at) VALUES
				('ws-1', 'acme', 'prj-1', 'exact', '{"terraform-version":"1.5.7","auto-apply":true}', 1, 1),
				('ws-2', 'acme', 'prj-1', 'vee', '{"terraform-version":"v1.0.30"}', 1, 1),
				('ws-3', 'acme', 'prj-1', 'latest', '{"terraform-version":"latest"}', 1, 1),
				('ws-4', 'acme', 'prj-1', 'none', '{}', 1, 1),
				('ws-5', 'acme', 'prj-1', 'constraint', '{"terraform-version":"~> 1.5.0"}', 1, 1)`)
			if err := db.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			rows, err := store.Pairs(ctx, db, `SELECT name, terraform_version FROM workspaces ORDER BY id`)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range rows {
				got = append(got, r[0]+"="+r[1])
			}
			want := "exact=1.5.7 vee=1.0.30 latest=latest none=latest constraint=~> 1.5.0"
			if strings.Join(got, " ") != want {
				t.Fatalf("after the migration: %q, want %q", strings.Join(got, " "), want)
			}
		})
	}
}
