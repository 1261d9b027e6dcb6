package workspace_test

import (
	"fmt"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestWorkspaceCountsFollowEveryChange: an unfiltered list's total (an
// owner's or a site admin's: every workspace of the organization) comes
// from the count the store keeps (migration 1043), and that count follows
// every way a workspace comes and goes: creation, deletion (by the API and
// in plain SQL), a renamed organization, and the organization's deletion.
// A filtered list counts its rows as before.
func TestWorkspaceCountsFollowEveryChange(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		newOrg(t, c, "cnt")
		newOrg(t, c, "other")
		total := func(org string, o *tfe.WorkspaceListOptions) int {
			t.Helper()
			if o == nil {
				o = &tfe.WorkspaceListOptions{}
			}
			o.PageSize = 2
			l, err := c.Workspaces.List(ctx, org, o)
			if err != nil {
				t.Fatal(err)
			}
			return l.TotalCount
		}
		if n := total("cnt", nil); n != 0 {
			t.Fatalf("an organization without workspaces lists %d", n)
		}
		var ids []string
		for i := range 5 {
			w, err := c.Workspaces.Create(ctx, "cnt", tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("w%d", i))})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, w.ID)
		}
		if _, err := c.Workspaces.Create(ctx, "other", tfe.WorkspaceCreateOptions{Name: tfe.String("w0")}); err != nil {
			t.Fatal(err)
		}
		if n := total("cnt", nil); n != 5 {
			t.Fatalf("after 5 creations the list's total is %d", n)
		}
		if err := c.Workspaces.DeleteByID(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.DB.Exec(ctx, `DELETE FROM workspaces WHERE id = ?`, ids[1]); err != nil {
			t.Fatal(err)
		}
		if n := total("cnt", nil); n != 3 {
			t.Fatalf("after two deletions the list's total is %d, want 3", n)
		}
		if _, err := c.Organizations.Update(ctx, "cnt", tfe.OrganizationUpdateOptions{Name: tfe.String("cnt2")}); err != nil {
			t.Fatal(err)
		}
		if n := total("cnt2", nil); n != 3 {
			t.Fatalf("after the organization's rename the list's total is %d, want 3", n)
		}
		if n := total("other", nil); n != 1 {
			t.Fatalf("the other organization's total is %d, want 1", n)
		}

		// The total is the kept count: set wrong in the store, an
		// unfiltered list shows it, and a filtered one counts its rows.
		if _, err := e.Server.DB.Exec(ctx, `UPDATE workspace_counts SET workspaces = 42 WHERE organization_name = ?`, "cnt2"); err != nil {
			t.Fatal(err)
		}
		if n := total("cnt2", nil); n != 42 {
			t.Fatalf("the unfiltered total is %d, not the kept count (42)", n)
		}
		if n := total("cnt2", &tfe.WorkspaceListOptions{Search: "w"}); n != 3 {
			t.Fatalf("a filtered list's total is %d, want its 3 rows", n)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE workspace_counts SET workspaces = 3 WHERE organization_name = ?`, "cnt2"); err != nil {
			t.Fatal(err)
		}

		// The organization's deletion takes its workspaces and its count;
		// a new organization of the same name starts from nothing.
		if err := c.Organizations.Delete(ctx, "cnt2"); err != nil {
			t.Fatal(err)
		}
		var rows int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM workspace_counts WHERE organization_name = ?`, "cnt2").Scan(&rows); err != nil || rows != 0 {
			t.Fatalf("the deleted organization's count: %d rows, %v", rows, err)
		}
		newOrg(t, c, "cnt2")
		if n := total("cnt2", nil); n != 0 {
			t.Fatalf("a new organization of a deleted one's name lists %d", n)
		}
		if _, err := c.Workspaces.Create(ctx, "cnt2", tfe.WorkspaceCreateOptions{Name: tfe.String("again")}); err != nil {
			t.Fatal(err)
		}
		if n := total("cnt2", nil); n != 1 {
			t.Fatalf("after one creation the new organization's total is %d", n)
		}
	})
}
