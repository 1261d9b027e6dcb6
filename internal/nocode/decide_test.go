package nocode_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/nocode"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestTheServiceDecidesTheProvision: the no-code service asks
// ProjectProvisionNoCode itself, of whoever calls it (the API, the UI, a
// caller yet to come), in the project named or, with none, in the
// organization's default project, where the workspace would go; a refusal
// makes nothing.
func TestTheServiceDecidesTheProvision(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		const org = "acme"
		testenv.NewOrg(t, e.Client, org)
		ncm := enabledModule(t, e, org)
		apps, err := e.Client.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "apps"})
		if err != nil {
			t.Fatal(err)
		}
		team, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("app-makers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom,
			WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: tfe.Bool(true)},
			Team:            team, Project: apps}); err != nil {
			t.Fatal(err)
		}
		o, err := e.Client.Organizations.Read(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead,
			Team: team, Project: o.DefaultProject}); err != nil {
			t.Fatal(err)
		}
		tok, err := e.Client.TeamTokens.Create(ctx, team.ID)
		if err != nil {
			t.Fatal(err)
		}
		p, err := e.Server.Auth.Authenticate(ctx, tok.Token)
		if err != nil {
			t.Fatal(err)
		}
		as := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		vars := []nocode.Var{{Key: "region", Value: "us-east-1", Category: "terraform"}}

		// No project: the default one, which the team reads but may not
		// provision in; refused as a provision, not as the workspace's
		// creation that would follow.
		_, err = e.Server.NoCode.CreateWorkspace(as, ncm.ID, nocode.WorkspaceOptions{Name: "in-default", Vars: vars})
		if core.KindOf(err) != core.KindForbidden || !strings.Contains(err.Error(), "no-code") {
			t.Fatalf("provisioning into the default project without its grant: %v (%v), want forbidden to provision no-code workspaces", err, core.KindOf(err))
		}
		if _, err := e.Client.Workspaces.Read(ctx, org, "in-default"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a refused provision made its workspace: %v", err)
		}
		// The API refuses it too.
		team1 := e.NewClient(t, tok.Token)
		if _, err := team1.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{Name: "in-default",
			Variables: []*tfe.Variable{{Key: "region", Value: "us-east-1", Category: tfe.CategoryTerraform}}}); err == nil {
			t.Fatal("the API provisioned into the default project for a team without its grant")
		}

		ws, err := e.Server.NoCode.CreateWorkspace(as, ncm.ID, nocode.WorkspaceOptions{Name: "in-apps", ProjectID: apps.ID, Vars: vars})
		if err != nil {
			t.Fatalf("provisioning into the project the team may create in: %v", err)
		}
		if ws.ProjectID != apps.ID {
			t.Errorf("the workspace went to project %s, want %s", ws.ProjectID, apps.ID)
		}
	})
}
