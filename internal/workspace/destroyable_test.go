package workspace_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestIsDestroyableIsCanDestroy: a workspace's actions.is-destroyable is
// the model's WorkspaceDelete decision, as permissions.can-destroy is: a
// team with admin on the workspace may delete it (and is told so), one
// with read may not.
func TestIsDestroyableIsCanDestroy(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		for access, want := range map[tfe.AccessType]bool{tfe.AccessAdmin: true, tfe.AccessRead: false} {
			tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("team-" + string(access))})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: tm, Workspace: ws}); err != nil {
				t.Fatal(err)
			}
			uc, _ := e.UserClient(t, "acme", string(access)+"@acme.test", tm)
			w, err := uc.Workspaces.ReadByID(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if w.Actions == nil || w.Permissions == nil || w.Actions.IsDestroyable != want || w.Permissions.CanDestroy != want {
				t.Errorf("%s team: is-destroyable %+v, can-destroy %+v, want %v", access, w.Actions, w.Permissions, want)
			}
		}
	})
}
