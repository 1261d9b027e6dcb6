package nocode

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestCreateBesideFlagUpdate: a no-code module created while the registry
// sets the module's no-code flag (which makes a no-code module) takes the
// rows in the flag update's order, so both finish: the flag update's
// commits and the create is refused as a conflict (the module has its
// no-code module now). Before (2026-11-30) the create inserted first and
// wrote the flag after, the flag update took them the other way round,
// and on PostgreSQL the two deadlocked: one was aborted, a server error.
// Both stores.
func TestCreateBesideFlagUpdate(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
		s := NewService(db)
		s.Registry = privateModules{}
		now := core.Micros(core.Now())
		for _, q := range []string{
			`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-acme', 'acme', 'ops@acme.test', ?, ?)`,
			`INSERT INTO registry_modules (id, organization_name, registry_name, namespace, name, provider, no_code, created_at, updated_at) VALUES ('mod-x', 'acme', 'private', 'acme', 'mod-x', 'null', false, ?, ?)`,
		} {
			if _, err := db.Exec(ctx, q, now, now); err != nil {
				t.Fatal(err)
			}
		}
		// The flag update's transaction, as registry.Service.Update's: it
		// writes the registry module's row, the create starts, and then
		// (OnNoCodeFlag) it makes the no-code module.
		wrote, more, commit, done := make(chan struct{}), make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- db.Tx(ctx, func(tx *store.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE registry_modules SET no_code = ?, updated_at = ? WHERE id = ?`, true, now, "mod-x"); err != nil {
					return err
				}
				close(wrote)
				<-more
				m := &registry.Module{ID: "mod-x", Organization: "acme"}
				if err := SetModuleFlag(ctx, tx, m, true); err != nil {
					return err
				}
				<-commit
				return nil
			})
		}()
		select {
		case <-wrote:
		case err := <-done:
			t.Fatalf("the flag update: %v", err)
		}
		acted := make(chan error, 1)
		go func() {
			_, err := s.Create(ctx, "acme", CreateOptions{RegistryModuleID: "mod-x"})
			acted <- err
		}()
		select {
		case err := <-acted: // it did not wait for the flag update
			acted <- err
		case <-time.After(300 * time.Millisecond):
		}
		close(more)
		close(commit)
		if err := <-done; err != nil {
			t.Fatalf("the flag update beside a create: %v, want it committed", err)
		}
		if err := <-acted; core.KindOf(err) != core.KindConflict {
			t.Fatalf("a create beside the flag update: %v, want a conflict (the module has a no-code module now)", err)
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM no_code_modules WHERE registry_module_id = ? AND enabled = ?`, "mod-x", true).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("mod-x has %d enabled no-code modules, want the flag update's one", n)
		}
	})
}
