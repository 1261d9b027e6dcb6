package server_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestWorkspaceReadRoundTrips pins what one go-tfe Workspaces.Read by an
// organization member costs in store round trips: the authorization
// guard and the handler share the workspace and the caller's teams
// (the request memo), and nothing is read twice. (The least of several
// reads, so that a background loop's query does not count.) It also
// proves that a read after a change sees the change: the memo lives one
// request.
func TestWorkspaceReadRoundTrips(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rt")
		owners, err := e.Client.Teams.List(ctx, "rt", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		c, _ := e.UserClient(t, "rt", "reader@rt.test", owners.Items[0])
		if _, err := e.Client.Workspaces.Create(ctx, "rt", tfe.WorkspaceCreateOptions{Name: tfe.String("w")}); err != nil {
			t.Fatal(err)
		}
		least := int64(1 << 30)
		for i := range 10 {
			before := e.Server.DB.Queries()
			w, err := c.Workspaces.Read(ctx, "rt", "w")
			if err != nil {
				t.Fatal(err)
			}
			if n := e.Server.DB.Queries() - before; n < least {
				least = n
			}
			if w.Permissions == nil || !w.Permissions.CanUpdate {
				t.Fatalf("read %d: an owner's permissions are %+v", i, w.Permissions)
			}
		}
		// Before the request memo the guard and the handler each looked
		// the workspace up by name (two queries), read it and its tags,
		// and the caller's teams: five more than now.
		if least > 13 {
			t.Errorf("a workspace read costs %d store queries, want at most 13", least)
		}
		if _, err := c.Workspaces.Update(ctx, "rt", "w", tfe.WorkspaceUpdateOptions{Description: tfe.String("changed")}); err != nil {
			t.Fatal(err)
		}
		if w, err := c.Workspaces.Read(ctx, "rt", "w"); err != nil || w.Description != "changed" {
			t.Fatalf("a read after an update: %v, %v", w, err)
		}
	})
}
