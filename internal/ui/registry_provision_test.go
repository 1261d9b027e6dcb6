package ui_test

import (
	"context"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// The registry offers Provision workspace on a no-code module only to
// those who may provision in some project: a member who may not create
// workspaces anywhere (only read a project) sees the module without it (the form would answer
// 403), one whose team manages workspaces sees it and gets the form.
func TestRegistryOffersProvisionToThoseAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	rm, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("bucket"), Provider: tfe.String("aws")})
	if err != nil {
		t.Fatal(err)
	}
	publish(t, e, tfe.RegistryModuleID{Organization: "acme", Name: "bucket", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry}, "1.0.0")
	nc, err := e.Client.RegistryNoCodeModules.Create(ctx, "acme", tfe.RegistryNoCodeModuleCreateOptions{RegistryModule: rm, Enabled: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("builders"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	// The member reads the default project's workspaces, and may create
	// none there.
	readers, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("readers"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	projects, err := e.Client.Projects.List(ctx, "acme", nil)
	if err != nil || len(projects.Items) != 1 {
		t.Fatalf("acme's projects: %+v, %v", projects, err)
	}
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: readers, Project: projects.Items[0]}); err != nil {
		t.Fatal(err)
	}
	const provision = `#modules a.provision`
	form := "/app/acme/no-code/" + nc.ID + "/provision"

	member := newTab(t, e, userToken(t, e, "acme", "member@acme.test", readers))
	member.open("/app/acme/registry")
	if got := member.text("#modules tbody td"); got != "bucket" {
		t.Fatalf("the member's registry lists %q, want the bucket module", got)
	}
	if member.exists(provision) {
		t.Fatal("a member who may not create workspaces is offered Provision workspace")
	}
	if st := member.open(form); st != http.StatusForbidden {
		t.Fatalf("the member opened the provision form: %d, want the 403 the button would lead to", st)
	}

	builder := newTab(t, e, userToken(t, e, "acme", "builder@acme.test", team))
	builder.open("/app/acme/registry")
	if !builder.exists(provision) {
		t.Fatal("a member whose team manages workspaces is not offered Provision workspace")
	}
	builder.press(provision)
	builder.waitLocation(form)
	if !builder.exists("#provision") {
		t.Fatal("Provision workspace did not lead to the form")
	}

	// A member whose team's project grant creates workspaces and nothing
	// more (HCP Terraform's permission for no-code) provisions: the
	// provision sets the variables and queues the first run itself.
	creators, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("creators"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom,
		WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: tfe.Bool(true)},
		Team:            creators, Project: projects.Items[0]}); err != nil {
		t.Fatal(err)
	}
	creator := newTab(t, e, userToken(t, e, "acme", "creator@acme.test", creators))
	creator.open(form)
	fillForm(creator, "#provision", map[string]string{"workspace_name": "bucket-dev", "var.size": "small"})
	creator.press("#provision button")
	creator.waitLocation("/app/acme/workspaces/bucket-dev")
	ws, err := e.Client.Workspaces.Read(ctx, "acme", "bucket-dev")
	if err != nil {
		t.Fatalf("the workspace the creator provisioned: %v", err)
	}
	vars, err := e.Client.Variables.List(ctx, ws.ID, nil)
	if err != nil || len(vars.Items) != 1 || vars.Items[0].Key != "size" || vars.Items[0].Value != "small" {
		t.Fatalf("the creator's provisioned variables: %+v, %v", vars, err)
	}
	if runs, err := e.Client.Runs.List(ctx, ws.ID, nil); err != nil || len(runs.Items) != 1 {
		t.Fatalf("the creator's provisioned workspace's runs: %+v, %v; want its first run", runs, err)
	}
}
