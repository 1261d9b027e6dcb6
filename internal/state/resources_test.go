package state_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	tfe "github.com/hashicorp/go-tfe"
)

// TestResourcesListedFromTheStore: a workspace's resource instances are
// listed, page by page, in the state's order. The first listing of a
// version keeps its instances in the store and every page after that is
// read from there (before, every page parsed the whole state); the
// instances go with their version.
func TestResourcesListedFromTheStore(t *testing.T) {
	forEachStore(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		e.org(t, "acme")
		ws := e.workspace(t, "acme", "net")
		raw := testState{serial: 1, resources: 250}.bytes()
		sv1, err := e.inline(t, e.Client, ws, 1, raw, func(o *tfe.StateVersionCreateOptions) { o.Lineage = tfe.String(lineageA) })
		if err != nil {
			t.Fatal(err)
		}
		// The state's managed instances: aws_instance.web[0..249], then
		// null_resource.n (the data source is not one).
		want := make([]string, 0, 251)
		for i := range 250 {
			want = append(want, fmt.Sprintf("aws_instance.web[%d]", i))
		}
		want = append(want, "null_resource.n")

		list := func(number, size int) *tfe.WorkspaceResourcesList {
			t.Helper()
			l, err := e.Client.WorkspaceResources.List(ctx, ws, &tfe.WorkspaceResourceListOptions{ListOptions: tfe.ListOptions{PageNumber: number, PageSize: size}})
			if err != nil {
				t.Fatal(err)
			}
			return l
		}
		all := func(size int) []*tfe.WorkspaceResource {
			t.Helper()
			var out []*tfe.WorkspaceResource
			for n := 1; ; n++ {
				l := list(n, size)
				if l.TotalCount != len(want) {
					t.Fatalf("page %d of %d: total %d, want %d", n, size, l.TotalCount, len(want))
				}
				out = append(out, l.Items...)
				if l.NextPage == 0 {
					return out
				}
			}
		}
		check := func(got []*tfe.WorkspaceResource, version string) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%d instances listed, want %d", len(got), len(want))
			}
			ids := map[string]bool{}
			for i, r := range got {
				if r.Address != want[i] || r.ModifiedByStateVersionID != version || ids[r.ID] {
					t.Fatalf("instance %d: %s (id %s, version %s); want %s of %s, ids unique", i, r.Address, r.ID, r.ModifiedByStateVersionID, want[i], version)
				}
				ids[r.ID] = true
			}
			if r := got[3]; r.NameIndex == nil || *r.NameIndex != "3" || r.Module != "root" || r.Provider != "hashicorp/aws" || r.ProviderType != "aws_instance" || r.Name != "web" {
				t.Fatalf("aws_instance.web[3]: %+v", r)
			}
			if r := got[250]; r.NameIndex != nil {
				t.Fatalf("null_resource.n has a name index: %q", *r.NameIndex)
			}
		}

		// Four first listings at once: one of them keeps the instances,
		// once.
		// (t.Fatal belongs to the test's goroutine: the listings report
		// what they got.)
		var wg sync.WaitGroup
		failed := make([]string, 4)
		for i := range failed {
			wg.Go(func() {
				l, err := e.Client.WorkspaceResources.List(ctx, ws, &tfe.WorkspaceResourceListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 100}})
				switch {
				case err != nil:
					failed[i] = err.Error()
				case l.TotalCount != len(want) || len(l.Items) != 100 || l.Items[0].Address != want[100]:
					failed[i] = fmt.Sprintf("total %d, %d items", l.TotalCount, len(l.Items))
				}
			})
		}
		wg.Wait()
		for i, f := range failed {
			if f != "" {
				t.Fatalf("concurrent first listing %d: %s", i, f)
			}
		}
		var total, rows int
		if err := e.Server.DB.QueryRow(ctx, `SELECT total, (SELECT COUNT(*) FROM state_version_resources r WHERE r.state_version_id = l.state_version_id) FROM state_version_resource_lists l WHERE state_version_id = ?`, sv1.ID).Scan(&total, &rows); err != nil {
			t.Fatalf("the version's instances were not kept: %v", err)
		}
		if total != len(want) || rows != len(want) {
			t.Fatalf("kept %d instances (total %d), want %d", rows, total, len(want))
		}
		first := all(100)
		check(first, sv1.ID)
		if by7 := all(7); len(by7) != len(first) || by7[200].ID != first[200].ID {
			t.Fatal("pages of 7 list the instances differently from pages of 100")
		}
		// The pages come from the kept instances, not from the state.
		if _, err := e.Server.DB.Exec(ctx, `UPDATE state_version_resources SET address = 'kept.row' WHERE state_version_id = ? AND seq = 1`, sv1.ID); err != nil {
			t.Fatal(err)
		}
		if got := list(1, 5).Items[1].Address; got != "kept.row" {
			t.Fatalf("the second instance reads %q: the page was not read from the kept instances", got)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE state_version_resources SET address = ? WHERE state_version_id = ? AND seq = 1`, want[1], sv1.ID); err != nil {
			t.Fatal(err)
		}
		if l := list(30, 20); len(l.Items) != 0 || l.TotalCount != len(want) {
			t.Fatalf("a page past the last: %d items, total %d", len(l.Items), l.TotalCount)
		}

		// A new version: its own instances, modules and string keys in
		// HCP Terraform's address form.
		v2 := map[string]any{
			"version": 4, "terraform_version": "1.9.5", "serial": 2, "lineage": lineageA, "outputs": map[string]any{},
			"resources": []any{
				map[string]any{"module": "module.net.module.sub", "mode": "managed", "type": "aws_subnet", "name": "s", "provider": `module.net.provider["registry.terraform.io/hashicorp/aws"]`,
					"instances": []any{map[string]any{"index_key": "a", "attributes": map[string]any{}}, map[string]any{"index_key": "b", "attributes": map[string]any{}}}},
				map[string]any{"mode": "managed", "type": "terraform_data", "name": "t", "provider": `provider["terraform.io/builtin/terraform"]`, "instances": []any{map[string]any{"attributes": map[string]any{}}}},
			},
		}
		raw2, _ := json.Marshal(v2)
		sv2, err := e.inline(t, e.Client, ws, 2, raw2, func(o *tfe.StateVersionCreateOptions) { o.Lineage = tfe.String(lineageA) })
		if err != nil {
			t.Fatal(err)
		}
		want = []string{`net.sub.aws_subnet.s["a"]`, `net.sub.aws_subnet.s["b"]`, "terraform_data.t"}
		got := all(2)
		for i, r := range got {
			if i >= len(want) || r.Address != want[i] || r.ModifiedByStateVersionID != sv2.ID {
				t.Fatalf("version 2, instance %d: %+v; want %v", i, r, want)
			}
		}
		if len(got) != len(want) || got[0].Module != "net.sub" || got[0].NameIndex == nil || *got[0].NameIndex != "a" || got[2].NameIndex != nil {
			t.Fatalf("version 2: %d instances, first %+v", len(got), got[0])
		}

		// The kept instances go with their versions.
		if err := e.Server.States.DeleteWorkspaceStates(ctx, e.Server.DB, ws); err != nil {
			t.Fatal(err)
		}
		for _, table := range []string{"state_version_resource_lists", "state_version_resources"} {
			var n int
			if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM `+table+` WHERE state_version_id IN (?, ?)`, sv1.ID, sv2.ID).Scan(&n); err != nil || n != 0 {
				t.Fatalf("%s after the versions were deleted: %d rows, %v", table, n, err)
			}
		}
	})
}
