package server_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunReadRoundTrips pins what one go-tfe Runs.Read by an organization
// member costs in store round trips (the least of several reads, so that
// a background loop's query does not count): the token, the run (read
// once: the authorization guard and the handler share it through the
// request memo), its workspace for the guard, its events and its task
// stages. Clients poll this read while a run goes on (terraform's cloud
// backend, the UI, bench (a)), so each query is paid many times a run.
// A read after a change sees the change: the memo lives one request.
func TestRunReadRoundTrips(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rr")
		owners, err := e.Client.Teams.List(ctx, "rr", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		c, _ := e.UserClient(t, "rr", "reader@rr.test", owners.Items[0])
		ws, err := e.Client.Workspaces.Create(ctx, "rr", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}`)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlanned)
		least := int64(1 << 30)
		for i := range 10 {
			before := e.Server.DB.Queries()
			got, err := c.Runs.Read(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if n := e.Server.DB.Queries() - before; n < least {
				least = n
			}
			if got.Status != tfe.RunPlanned || got.Permissions == nil || !got.Permissions.CanApply || len(got.RunEvents) == 0 {
				t.Fatalf("read %d: status %s, permissions %+v, %d events", i, got.Status, got.Permissions, len(got.RunEvents))
			}
		}
		// Before the memo the guard and the handler each read the run.
		if least > 5 {
			t.Errorf("a run read costs %d store queries, want at most 5", least)
		}
		if err := c.Runs.Discard(ctx, r.ID, tfe.RunDiscardOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Runs.Read(ctx, r.ID); err != nil || got.Status != tfe.RunDiscarded {
			t.Fatalf("a read after the discard: %v, %v", got, err)
		}
	})
}
