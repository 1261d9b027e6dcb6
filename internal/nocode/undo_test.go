package nocode_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestAFailedProvisionLeavesNothing: a provision that fails after its
// workspace was made removes the workspace, also for a provisioner whose
// project grant creates workspaces but does not delete them (it could not
// remove the workspace itself). The failure is the store's: a trigger
// refuses the no-code record, the step after the workspace and its
// variables.
func TestAFailedProvisionLeavesNothing(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		const org = "acme"
		testenv.NewOrg(t, e.Client, org)
		ncm := enabledModule(t, e, org)
		o, err := e.Client.Organizations.Read(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		team, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("provisioners")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom,
			WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: tfe.Bool(true), Delete: tfe.Bool(false)},
			Team:            team, Project: o.DefaultProject}); err != nil {
			t.Fatal(err)
		}
		user, _ := e.UserClient(t, org, "provisioner@acme.test", team)
		provision := func(name string) (*tfe.Workspace, error) {
			return user.RegistryNoCodeModules.CreateWorkspace(ctx, ncm.ID, &tfe.RegistryNoCodeModuleCreateWorkspaceOptions{
				Name: name, Project: o.DefaultProject, Variables: []*tfe.Variable{{Key: "region", Value: "us-east-1", Category: tfe.CategoryTerraform}}})
		}

		inject := []string{`CREATE TRIGGER refuse_nocode BEFORE INSERT ON no_code_workspaces BEGIN SELECT RAISE(ABORT, 'injected failure'); END`}
		lift := []string{`DROP TRIGGER refuse_nocode`}
		if e.Server.DB.Driver().Name() == "postgres" {
			inject = []string{`CREATE FUNCTION refuse_nocode() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'injected failure'; END $$`,
				`CREATE TRIGGER refuse_nocode BEFORE INSERT ON no_code_workspaces FOR EACH ROW EXECUTE FUNCTION refuse_nocode()`}
			lift = []string{`DROP TRIGGER refuse_nocode ON no_code_workspaces`, `DROP FUNCTION refuse_nocode()`}
		}
		for _, q := range inject {
			if _, err := e.Server.DB.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := provision("half-made"); err == nil {
			t.Fatal("a provision whose no-code record was refused succeeded")
		}
		if _, err := e.Client.Workspaces.Read(ctx, org, "half-made"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a failed provision left its workspace: %v", err)
		}
		for _, q := range lift {
			if _, err := e.Server.DB.Exec(ctx, q); err != nil {
				t.Fatal(err)
			}
		}

		// The same provision succeeds once the store takes it, and what it
		// makes its provisioner may not delete: the undo did not ask.
		ws, err := provision("half-made")
		if err != nil {
			t.Fatalf("provisioning after the failure: %v", err)
		}
		if runs, err := e.Client.Runs.List(ctx, ws.ID, nil); err != nil || len(runs.Items) != 1 {
			t.Fatalf("the provisioned workspace's runs: %v, %v; want its first run", runs, err)
		}
		if err := user.Workspaces.SafeDeleteByID(ctx, ws.ID); err == nil || !strings.HasPrefix(err.Error(), "forbidden") {
			t.Fatalf("the provisioner deleting a workspace it may not: %v, want forbidden", err)
		}
	})
}
