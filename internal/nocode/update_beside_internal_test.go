package nocode

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestUpdateBesideOtherWork: an update of a no-code module that overlaps
// another update of it acts on what the other committed. Before
// (2026-11-30) it decided from the module read before its transaction and
// wrote regardless: two updates switching the registry module at once
// left the first's registry module marked no-code with no no-code module,
// and a disable beside a switch was undone (on both stores: the read did
// not wait for the other writer).
func TestUpdateBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"two switches of the registry module",
		"a switch beside a disable",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { updateBeside(t, db, name) })
		})
	}
}

// privateModules is a registry of private modules with no published
// version, named by their IDs.
type privateModules struct{ Registry }

func (privateModules) GetByID(_ context.Context, id string) (*registry.Module, error) {
	return &registry.Module{ID: id, Organization: "acme", RegistryName: registry.RegistryPrivate, Namespace: "acme", Name: id, Provider: "null"}, nil
}

func (privateModules) ReadVersion(context.Context, string, string, string, string) (*registry.Module, *registry.Version, error) {
	return nil, nil, core.NotFound("no published version")
}

func updateBeside(t *testing.T, db *store.DB, name string) {
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
	s := NewService(db)
	s.Registry = privateModules{}
	now := core.Micros(core.Now())
	mustExec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(ctx, q, args...); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-acme', 'acme', 'ops@acme.test', ?, ?)`, now, now)
	for _, id := range []string{"mod-x", "mod-y", "mod-z"} {
		mustExec(`INSERT INTO registry_modules (id, organization_name, registry_name, namespace, name, provider, no_code, created_at, updated_at) VALUES (?, 'acme', 'private', 'acme', ?, 'null', ?, ?, ?)`,
			id, id, id == "mod-x", now, now)
	}
	mustExec(`INSERT INTO no_code_modules (id, organization_name, registry_module_id, enabled, version_pin, created_at, updated_at) VALUES ('nocode-1', 'acme', 'mod-x', ?, '', ?, ?)`, true, now, now)
	// beside runs change's statements in a transaction held open once
	// they are written, while act starts; it returns act's error.
	beside := func(t *testing.T, change [][]any, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, storetest.Statements(change...), act)
	}
	toZ := func() error {
		_, err := s.Update(ctx, "nocode-1", UpdateOptions{RegistryModuleID: "mod-z"})
		return err
	}
	// check compares the no-code module and the registry modules' flags.
	check := func(t *testing.T, wantEnabled bool, wantNoCode map[string]bool) {
		t.Helper()
		n, err := s.Get(ctx, "nocode-1")
		if err != nil {
			t.Fatal(err)
		}
		if n.RegistryModuleID != "mod-z" || n.Enabled != wantEnabled {
			t.Errorf("the no-code module is on %s, enabled %v; want mod-z, enabled %v", n.RegistryModuleID, n.Enabled, wantEnabled)
		}
		for id, want := range wantNoCode {
			var got bool
			if err := db.QueryRow(ctx, `SELECT no_code FROM registry_modules WHERE id = ?`, id).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("registry module %s is marked no-code %v, want %v", id, got, want)
			}
		}
	}
	later := now + 1000

	switch name {
	case "two switches of the registry module":
		// The other update, as Update writes it: mod-x to mod-y.
		err := beside(t, [][]any{
			{`UPDATE no_code_modules SET registry_module_id = ?, updated_at = ? WHERE id = ?`, "mod-y", later, "nocode-1"},
			{`UPDATE registry_modules SET no_code = ? WHERE id = ?`, false, "mod-x"},
			{`UPDATE registry_modules SET no_code = ? WHERE id = ?`, true, "mod-y"},
		}, toZ)
		if err != nil {
			t.Fatalf("switching to mod-z beside a switch to mod-y: %v", err)
		}
		check(t, true, map[string]bool{"mod-x": false, "mod-y": false, "mod-z": true})

	case "a switch beside a disable":
		err := beside(t, [][]any{
			{`UPDATE no_code_modules SET enabled = ?, updated_at = ? WHERE id = ?`, false, later, "nocode-1"},
			{`UPDATE registry_modules SET no_code = ? WHERE id = ?`, false, "mod-x"},
		}, toZ)
		if err != nil {
			t.Fatalf("switching to mod-z beside a disable: %v", err)
		}
		check(t, false, map[string]bool{"mod-x": false, "mod-y": false, "mod-z": false})
	}
}
