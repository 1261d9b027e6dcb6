package notify

import (
	"context"
	"fmt"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestCreateBesideOtherCreate: a configuration created while another of
// the same workspace is being stored (its transaction not yet committed),
// the other its last under MaxPerSubscribable, waits for it and is
// refused. Before (2026-11-30), on PostgreSQL, both counted one under the
// limit and both were saved. Both stores; SQLite's transactions never
// overlap.
func TestCreateBesideOtherCreate(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
		s, err := NewService(Options{DB: db, Subscribables: oneOrg{}})
		if err != nil {
			t.Fatal(err)
		}
		now := core.Micros(core.Now())
		if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now); err != nil {
			t.Fatal(err)
		}
		for i := range MaxPerSubscribable - 1 {
			if _, err := db.Exec(ctx, `INSERT INTO notification_configurations (id, organization_name, subscribable_type, subscribable_id, name, destination_type, url, enabled, triggers, email_addresses, email_user_ids, delivery_responses, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				fmt.Sprintf("nc-%d", i), "acme", OnWorkspace, "ws-1", "n", string(Generic), "https://hooks.example/a", false, `[]`, `[]`, `[]`, `[]`, now, now); err != nil {
				t.Fatal(err)
			}
		}
		name, dest, url := "n", Generic, "https://hooks.example/a"
		disabled := Changes{Name: &name, Destination: &dest, URL: &url}
		// The other create's transaction, as Create's: held open once its
		// configuration, the last the limit allows, is inserted.
		err = storetest.Beside(t, db, func(tx *store.Tx) error {
			c := &Configuration{ID: "nc-other", Organization: "acme", SubscribableType: OnWorkspace, SubscribableID: "ws-1",
				Triggers: []string{}, EmailAddresses: []string{}, EmailUserIDs: []string{}, Responses: []Response{}, CreatedAt: core.Now(), UpdatedAt: core.Now()}
			if err := apply(c, disabled); err != nil {
				return err
			}
			return s.insertCounted(ctx, tx, c)
		}, func() error {
			_, err := s.Create(ctx, OnWorkspace, "ws-1", disabled)
			return err
		})
		if core.KindOf(err) != core.KindInvalid {
			t.Fatalf("a create beside the one that reaches the limit: %v, want it refused (at most %d)", err, MaxPerSubscribable)
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM notification_configurations WHERE subscribable_id = ?`, "ws-1").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != MaxPerSubscribable {
			t.Fatalf("the workspace has %d configurations, want %d", n, MaxPerSubscribable)
		}
	})
}
