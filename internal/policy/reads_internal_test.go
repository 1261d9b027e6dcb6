package policy

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestPageReads: what the policy set pages read, on both stores.
// VersionsOf returns the versions of the organization's sets only, and
// only to whoever reads the organization (an owner here: without the
// authorization model only owners pass); SetPolicies returns what an
// evaluation reads (a versioned set's policies.hcl, else the set's own
// policies), by name, with no level for a Sentinel version's policies.
func TestPageReads(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, Owns: []string{"acme"}, Orgs: []string{"acme"}})
		s := &Service{o: Options{DB: db}}
		now := core.Micros(core.Now())
		hcl := `{"policies.hcl": "policy \"zeta\" {\n  query = \"data.z.deny\"\n  enforcement_level = \"mandatory\"\n}\npolicy \"alpha\" {\n  query = \"data.a.deny\"\n  enforcement_level = \"advisory\"\n  description = \"first\"\n}\n", "a.rego": "package a\n"}`
		storetest.Seed(t, db,
			[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now},
			[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-other", "other", "ops@other.test", now, now},
			[]any{`INSERT INTO policy_sets (id, organization_name, name, kind, versioned, current_version_id, newest_version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"polset-v", "acme", "versioned", "opa", true, "polsetver-a", "polsetver-a", now, now},
			[]any{`INSERT INTO policy_sets (id, organization_name, name, kind, versioned, current_version_id, newest_version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"polset-s", "acme", "sentinel", "sentinel", true, "polsetver-s", "polsetver-s", now, now},
			[]any{`INSERT INTO policy_sets (id, organization_name, name, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
				"polset-n", "acme", "plain", "opa", now, now},
			[]any{`INSERT INTO policy_sets (id, organization_name, name, kind, versioned, current_version_id, newest_version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"polset-o", "other", "theirs", "opa", true, "polsetver-o", "polsetver-o", now, now},
			[]any{`INSERT INTO policy_set_versions (id, policy_set_id, status, status_timestamps, files, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				"polsetver-a", "polset-v", "ready", `{}`, hcl, now, now},
			[]any{`INSERT INTO policy_set_versions (id, policy_set_id, status, status_timestamps, files, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				"polsetver-s", "polset-s", "ready", `{}`, `{"b.sentinel": "main = rule { true }", "a.sentinel": "main = rule { true }"}`, now, now},
			[]any{`INSERT INTO policy_set_versions (id, policy_set_id, status, status_timestamps, files, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				"polsetver-o", "polset-o", "ready", `{}`, hcl, now, now},
			[]any{`INSERT INTO policies (id, organization_name, name, description, kind, query, enforcement_level, enforce_path, content, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"pol-2", "acme", "early", "", "opa", "data.s.deny", "mandatory", "second.rego", "package s\n", now, now},
			[]any{`INSERT INTO policies (id, organization_name, name, description, kind, query, enforcement_level, enforce_path, content, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				"pol-1", "acme", "later", "one", "opa", "data.f.deny", "advisory", "first.rego", "package f\n", now, now},
			[]any{`INSERT INTO policy_set_policies (policy_set_id, policy_id) VALUES (?, ?)`, "polset-n", "pol-2"},
			[]any{`INSERT INTO policy_set_policies (policy_set_id, policy_id) VALUES (?, ?)`, "polset-n", "pol-1"},
		)

		vs, err := s.VersionsOf(ctx, "acme", []string{"polsetver-a", "polsetver-o", "polsetver-none"})
		if err != nil {
			t.Fatal(err)
		}
		if len(vs) != 1 || vs["polsetver-a"] == nil || vs["polsetver-a"].Status != VersionReady || vs["polsetver-a"].SetID != "polset-v" {
			t.Errorf("acme's versions of a, o and none: %v, want a's alone", slices.Sorted(maps.Keys(vs)))
		}
		if _, err := s.VersionsOf(ctx, "other", []string{"polsetver-o"}); err == nil {
			t.Error("an owner of acme alone reads the versions of other's sets")
		}

		for id, want := range map[string][]SetPolicy{
			"polset-v": {{Name: "alpha", Query: "data.a.deny", Level: Advisory, Description: "first"}, {Name: "zeta", Query: "data.z.deny", Level: Mandatory}},
			"polset-s": {{Name: "a"}, {Name: "b"}},
			"polset-n": {{ID: "pol-2", Name: "early", Query: "data.s.deny", Level: Mandatory}, {ID: "pol-1", Name: "later", Description: "one", Query: "data.f.deny", Level: Advisory}},
		} {
			set, err := s.Set(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			got, err := s.SetPolicies(ctx, set)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the policies of %s: %+v, want %+v", id, got, want)
			}
		}
		theirs, err := s.SystemSet(ctx, "polset-o")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetPolicies(ctx, theirs); err == nil {
			t.Error("an owner of acme alone reads the policies of other's set")
		}
	})
}
