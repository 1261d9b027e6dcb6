package agent

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestUpdateBesideOtherWork: a rename of an agent pool that overlaps
// another change of the pool keeps what the other committed. Before
// (2026-11-30) the pool was read before the update's transaction and
// written back whole: organization-scoped changed beside came back as it
// was (on both stores: the read did not wait for the other writer).
func TestUpdateBesideOtherWork(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
		s := NewService(db)
		now := core.Micros(core.Now())
		storetest.Seed(t, db,
			[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
			[]any{`INSERT INTO agent_pools (id, organization_name, name, organization_scoped, created_at) VALUES (?, ?, ?, ?, ?)`, "apool-1", "acme", "pool", true, now},
		)
		// The other change, held open once written: the pool is no
		// longer organization-scoped.
		err := storetest.Beside(t, db, storetest.Statements(
			[]any{`UPDATE agent_pools SET organization_scoped = ? WHERE id = ?`, false, "apool-1"},
		), func() error {
			name := "renamed"
			_, err := s.Update(ctx, "apool-1", &name, nil, Scope{})
			return err
		})
		if err != nil {
			t.Fatalf("renaming the pool beside the change of its scope: %v", err)
		}
		p, err := s.Get(ctx, "apool-1")
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "renamed" || p.OrganizationScoped {
			t.Fatalf("after both the pool is %q, organization-scoped %v; want renamed, not organization-scoped (changed beside)", p.Name, p.OrganizationScoped)
		}
	})
}
