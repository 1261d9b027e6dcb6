package workspace_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A workspace admin's own user token changes the workspace in every way
// the API offers admins: tags, tag bindings, state sharing, an SSH key, a
// forced unlock, safe and forced deletion. Each of these asked the
// authorization model inside its transaction, where reading the user's
// teams took a second connection (the transaction guard, on in make test,
// refused it: a 500; without the guard, a pool that can deadlock). The
// site admin's token never showed it: it reads no teams.
func TestWorkspaceChangesByAnAdminsUserToken(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		admins, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("admins")})
		if err != nil {
			t.Fatal(err)
		}
		ws := map[string]*tfe.Workspace{}
		for _, name := range []string{"app", "reader", "safe-gone", "force-gone"} {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: admins, Workspace: w}); err != nil {
				t.Fatal(err)
			}
			ws[name] = w
		}
		key, err := c.SSHKeys.Create(ctx, "acme", tfe.SSHKeyCreateOptions{Name: tfe.String("deploy"), Value: tfe.String("private-key-material")})
		if err != nil {
			t.Fatal(err)
		}
		alice, _ := e.UserClient(t, "acme", "alice@acme.test", admins)
		app := ws["app"].ID
		steps := []struct {
			what string
			do   func() error
		}{
			{"add tags", func() error {
				return alice.Workspaces.AddTags(ctx, app, tfe.WorkspaceAddTagsOptions{Tags: []*tfe.Tag{{Name: "web"}}})
			}},
			{"remove tags", func() error {
				return alice.Workspaces.RemoveTags(ctx, app, tfe.WorkspaceRemoveTagsOptions{Tags: []*tfe.Tag{{Name: "web"}}})
			}},
			{"add tag bindings", func() error {
				_, err := alice.Workspaces.AddTagBindings(ctx, app, tfe.WorkspaceAddTagBindingsOptions{TagBindings: []*tfe.TagBinding{{Key: "env", Value: "prod"}}})
				return err
			}},
			{"add a state consumer", func() error {
				return alice.Workspaces.AddRemoteStateConsumers(ctx, app, tfe.WorkspaceAddRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{ws["reader"]}})
			}},
			{"remove a state consumer", func() error {
				return alice.Workspaces.RemoveRemoteStateConsumers(ctx, app, tfe.WorkspaceRemoveRemoteStateConsumersOptions{Workspaces: []*tfe.Workspace{ws["reader"]}})
			}},
			{"assign an SSH key", func() error {
				_, err := alice.Workspaces.AssignSSHKey(ctx, app, tfe.WorkspaceAssignSSHKeyOptions{SSHKeyID: tfe.String(key.ID)})
				return err
			}},
			{"force-unlock", func() error {
				if _, err := c.Workspaces.Lock(ctx, app, tfe.WorkspaceLockOptions{Reason: tfe.String("the admin's")}); err != nil {
					return err
				}
				_, err := alice.Workspaces.ForceUnlock(ctx, app)
				return err
			}},
			{"safe-delete", func() error { return alice.Workspaces.SafeDeleteByID(ctx, ws["safe-gone"].ID) }},
			{"force-delete", func() error { return alice.Workspaces.DeleteByID(ctx, ws["force-gone"].ID) }},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Errorf("%s: %v", s.what, err)
			}
		}
		for _, gone := range []string{"safe-gone", "force-gone"} {
			if _, err := c.Workspaces.ReadByID(ctx, ws[gone].ID); err == nil {
				t.Errorf("%s still exists", gone)
			}
		}
	})
}

// Deleting asks what the API tells: a team whose project grant gives
// the delete permission (can-destroy, not can-force-delete) safe-deletes
// a workspace, and is refused the forced delete, which keeps it.
func TestSafeDeleteIsCanDestroy(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "apps"})
		if err != nil {
			t.Fatal(err)
		}
		cleaners, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("cleaners")})
		if err != nil {
			t.Fatal(err)
		}
		read := tfe.ProjectSettingsPermissionRead
		if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom, Team: cleaners, Project: prj,
			ProjectAccess:   &tfe.TeamProjectAccessProjectPermissionsOptions{Settings: &read},
			WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Delete: tfe.Bool(true)}}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, name := range []string{"one", "two"} {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name), Project: prj})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, w.ID)
		}
		bo, _ := e.UserClient(t, "acme", "bo@acme.test", cleaners)
		w, err := bo.Workspaces.ReadByID(ctx, ids[0])
		if err != nil {
			t.Fatal(err)
		}
		if !w.Permissions.CanDestroy || w.Permissions.CanForceDelete == nil || *w.Permissions.CanForceDelete {
			t.Fatalf("bo is told can-destroy %v, can-force-delete %v; want true, false", w.Permissions.CanDestroy, w.Permissions.CanForceDelete)
		}
		if err := bo.Workspaces.SafeDeleteByID(ctx, ids[0]); err != nil {
			t.Errorf("bo's safe delete: %v", err)
		}
		if err := bo.Workspaces.DeleteByID(ctx, ids[1]); err == nil {
			t.Error("bo force-deleted a workspace the API tells him he may not")
		}
		if _, err := c.Workspaces.ReadByID(ctx, ids[1]); err != nil {
			t.Errorf("the workspace bo was refused: %v", err)
		}
	})
}
