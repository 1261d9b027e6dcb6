package registry_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A module manager's own user token deletes a module version and the
// module. The delete asked the authorization model inside its
// transaction, where it read the user's teams on a second connection
// (refused by the transaction guard make test turns on); the site
// admin's token, which reads no teams, never showed it.
func TestModuleManagerDeletes(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		managers, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("modules"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageModules: tfe.Bool(true)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("net"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		id := tfe.RegistryModuleID{Organization: "acme", Name: "net", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		for _, v := range []string{"1.0.0", "1.1.0"} {
			if _, err := c.RegistryModules.CreateVersion(ctx, id, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String(v)}); err != nil {
				t.Fatal(err)
			}
		}
		mo, _ := e.UserClient(t, "acme", "mo@acme.test", managers)
		if err := mo.RegistryModules.DeleteVersion(ctx, id, "1.0.0"); err != nil {
			t.Fatalf("mo deleting a version: %v", err)
		}
		if err := mo.RegistryModules.DeleteByName(ctx, id); err != nil {
			t.Fatalf("mo deleting the module: %v", err)
		}
		if _, err := c.RegistryModules.Read(ctx, id); err == nil {
			t.Error("the module mo deleted is still there")
		}
	})
}
