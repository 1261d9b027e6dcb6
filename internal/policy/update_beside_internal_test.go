package policy

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestUpdatesBesideOtherWork: an update of a policy, a policy set or a
// set's parameter that overlaps another change of the same row keeps what
// the other committed. Before (2026-11-30) the row was read with no
// transaction and written back whole: an enforcement level, an
// overridable or a sensitivity changed beside came back as it was (on
// both stores: the read did not wait for the other writer).
func TestUpdatesBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"policy", "policy set", "parameter"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { updatesBeside(t, db, name) })
		})
	}
}

func updatesBeside(t *testing.T, db *store.DB, name string) {
	ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
	s := &Service{o: Options{DB: db}}
	now := core.Micros(core.Now())
	storetest.Seed(t, db,
		[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
		[]any{`INSERT INTO policies (id, organization_name, name, kind, enforcement_level, enforce_path, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			"pol-1", "acme", "p", "opa", "advisory", "p.rego", now, now},
		[]any{`INSERT INTO policy_sets (id, organization_name, name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			"polset-1", "acme", "s", "opa", now, now},
		[]any{`INSERT INTO policy_set_parameters (id, policy_set_id, key, value, created_at) VALUES (?, ?, ?, ?, ?)`,
			"var-1", "polset-1", "k", "v", now},
	)
	// beside runs change in a transaction held open once it has
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change string, args []any, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, storetest.Statements(append([]any{change}, args...)), act)
	}
	desc := "changed"

	switch name {
	case "policy":
		// The other change makes the policy mandatory; the update names
		// only the description.
		err := beside(t, `UPDATE policies SET enforcement_level = ? WHERE id = ?`, []any{"mandatory", "pol-1"}, func() error {
			_, err := s.UpdatePolicy(ctx, "pol-1", PolicyChanges{Description: &desc})
			return err
		})
		if err != nil {
			t.Fatalf("updating the policy's description beside the change of its enforcement: %v", err)
		}
		got, err := s.Policy(ctx, "pol-1")
		if err != nil {
			t.Fatal(err)
		}
		if got.EnforcementLevel != Mandatory || got.Description != desc {
			t.Fatalf("after both changes the policy is %s, %q; want mandatory (changed beside), %q", got.EnforcementLevel, got.Description, desc)
		}

	case "policy set":
		// The other change makes the set overridable.
		err := beside(t, `UPDATE policy_sets SET overridable = ? WHERE id = ?`, []any{true, "polset-1"}, func() error {
			_, err := s.UpdateSet(ctx, "polset-1", SetChanges{Description: &desc})
			return err
		})
		if err != nil {
			t.Fatalf("updating the set's description beside the change of its overridable: %v", err)
		}
		got, err := s.Set(ctx, "polset-1")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Overridable || got.Description != desc {
			t.Fatalf("after both changes the set is overridable %v, %q; want overridable (changed beside), %q", got.Overridable, got.Description, desc)
		}

	case "parameter":
		// The other change makes the parameter sensitive; the update
		// names only its value.
		value := "w"
		err := beside(t, `UPDATE policy_set_parameters SET sensitive = ? WHERE id = ?`, []any{true, "var-1"}, func() error {
			_, err := s.UpdateParameter(ctx, "polset-1", "var-1", ParameterChanges{Value: &value})
			return err
		})
		if err != nil {
			t.Fatalf("updating the parameter's value beside the change of its sensitivity: %v", err)
		}
		got, err := s.Parameter(ctx, "polset-1", "var-1")
		if err != nil {
			t.Fatal(err)
		}
		if !got.Sensitive || got.Value != value {
			t.Fatalf("after both changes the parameter is sensitive %v, value %q; want sensitive (changed beside), %q", got.Sensitive, got.Value, value)
		}
	}
}
