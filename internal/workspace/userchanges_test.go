package workspace_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/workspace"
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
		// Admins who are not owners force-delete only where the
		// organization allows it (TestForceDeleteFollowsTheOrganization).
		if _, err := c.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{AllowForceDeleteWorkspaces: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
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

// A forced delete (the API's DELETE, which counts no resources) is the
// owners' unless the organization's allow-force-delete-workspaces
// setting lets every workspace admin do it, as HCP Terraform decides it;
// what each caller is told as can-force-delete is what the server does.
func TestForceDeleteFollowsTheOrganization(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		admins, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("admins")})
		if err != nil {
			t.Fatal(err)
		}
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v (%d found)", err, len(owners.Items))
		}
		ws := map[string]*tfe.Workspace{}
		for _, name := range []string{"kept", "owners-gone", "admins-gone"} {
			w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: admins, Workspace: w}); err != nil {
				t.Fatal(err)
			}
			ws[name] = w
		}
		alice, _ := e.UserClient(t, "acme", "alice@acme.test", admins)
		olga, _ := e.UserClient(t, "acme", "olga@acme.test", owners.Items[0])
		told := func(who string, client *tfe.Client, id string, want bool) {
			t.Helper()
			w, err := client.Workspaces.ReadByID(ctx, id)
			if err != nil {
				t.Fatalf("%s reading %s: %v", who, id, err)
			}
			if w.Permissions.CanForceDelete == nil {
				t.Fatalf("%s is told no can-force-delete", who)
			}
			if *w.Permissions.CanForceDelete != want || !w.Permissions.CanDestroy {
				t.Errorf("%s is told can-force-delete %v, can-destroy %v; want %v, true", who, *w.Permissions.CanForceDelete, w.Permissions.CanDestroy, want)
			}
		}

		// The setting off (its default): the owner may, the admin may not.
		told("alice, setting off", alice, ws["kept"].ID, false)
		told("olga, setting off", olga, ws["kept"].ID, true)
		err = alice.Workspaces.DeleteByID(ctx, ws["kept"].ID)
		if err == nil || !strings.Contains(err.Error(), "allow-force-delete-workspaces") {
			t.Errorf("alice's force delete with the setting off: %v, want a refusal naming the setting", err)
		}
		if err := alice.Workspaces.Delete(ctx, "acme", "kept"); err == nil {
			t.Error("alice force-deleted by name with the setting off")
		}
		if _, err := c.Workspaces.ReadByID(ctx, ws["kept"].ID); err != nil {
			t.Errorf("the workspace alice was refused: %v", err)
		}
		if err := olga.Workspaces.DeleteByID(ctx, ws["owners-gone"].ID); err != nil {
			t.Errorf("olga's force delete: %v", err)
		}

		// The setting on: every workspace admin may.
		if _, err := c.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{AllowForceDeleteWorkspaces: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		told("alice, setting on", alice, ws["kept"].ID, true)
		if err := alice.Workspaces.DeleteByID(ctx, ws["admins-gone"].ID); err != nil {
			t.Errorf("alice's force delete with the setting on: %v", err)
		}
		for _, gone := range []string{"owners-gone", "admins-gone"} {
			if _, err := c.Workspaces.ReadByID(ctx, ws[gone].ID); err == nil {
				t.Errorf("%s still exists", gone)
			}
		}
	})
}

// A change decided on a workspace (checkedTx: the model asked before the
// transaction, the workspace reloaded for update in it) is refused when
// the workspace moved to another project in between, since the decision
// was about the project it left; the change is not made.
func TestChangesRefuseAWorkspaceMovedMeanwhile(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		var prj []*tfe.Project
		for _, name := range []string{"from", "to"} {
			p, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			prj = append(prj, p)
		}
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: prj[0]})
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Server.Auth.Authenticate(ctx, e.Token)
		if err != nil {
			t.Fatal(err)
		}
		as := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		decidedIn, changed := "", false
		err = e.Server.Workspaces.CheckedTx(as, w.ID, func(ctx context.Context, pre *workspace.Workspace) error {
			decidedIn = pre.ProjectID
			_, err := c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{Project: prj[1]})
			return err
		}, func(*store.Tx, *workspace.Workspace) error {
			changed = true
			return nil
		})
		if core.KindOf(err) != core.KindConflict || !strings.Contains(err.Error(), "moved to another project") {
			t.Errorf("a change decided in %s after a move: %v, want a conflict", decidedIn, err)
		}
		if changed || decidedIn != prj[0].ID {
			t.Errorf("decided in %s, changed %v: want decided in %s, not changed", decidedIn, changed, prj[0].ID)
		}
	})
}
