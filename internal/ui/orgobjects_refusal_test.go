package ui_test

import (
	"context"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A member who reads the organization's projects, workspaces, teams and
// variable sets but may change none of them is offered no form on their
// pages, and each form's post, sent anyway, is refused as the API refuses
// it (403): nothing changes.
func TestOrgObjectFormsRefusedWithoutPermission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "infra", Description: tfe.String("as made")})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	e.UserClient(t, "acme", "dev@acme.test", ops)
	readers, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("readers"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ReadProjects: tfe.Bool(true), ReadWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Client.VariableSets.Create(ctx, "acme", &tfe.VariableSetCreateOptions{Name: tfe.String("common"), Global: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	v, err := e.Client.VariableSetVariables.Create(ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("REGION"), Value: tfe.String("eu"), Category: tfe.Category(tfe.CategoryEnv)})
	if err != nil {
		t.Fatal(err)
	}
	scoped, err := e.Client.VariableSets.Create(ctx, "acme", &tfe.VariableSetCreateOptions{Name: tfe.String("scoped"), Global: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.VariableSets.ApplyToWorkspaces(ctx, scoped.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{ws}}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, userToken(t, e, "acme", "member@acme.test", readers))

	for _, pg := range []struct {
		path, shown string
		forms       []string
		posts       map[string]map[string]string
	}{
		{"/app/acme/projects", `tr[data-project="infra"]`,
			[]string{"#new-project", "form.edit-project", "form.delete-project"},
			map[string]map[string]string{
				"/app/acme/projects":                       {"name": "sneaky"},
				"/app/acme/projects/" + prj.ID:             {"name": "renamed", "description": "changed"},
				"/app/acme/projects/" + prj.ID + "/delete": nil,
			}},
		{"/app/acme/teams", `tr[data-team="ops"] li[data-member="dev"]`,
			[]string{"#new-team", "form.add-member", "form.remove-member", "form.delete-team"},
			map[string]map[string]string{
				"/app/acme/teams":                               {"name": "sneaky", "visibility": "organization"},
				"/app/acme/teams/" + ops.ID + "/members":        {"username": "member"},
				"/app/acme/teams/" + ops.ID + "/members/remove": {"username": "dev"},
				"/app/acme/teams/" + ops.ID + "/delete":         nil,
			}},
		{"/app/acme/variable-sets", `section[data-varset="common"] tr[data-var="REGION"]`,
			[]string{"#new-varset", "form.add-var", "form.delete-var", "form.apply-varset", "form.remove-target", "form.delete-varset"},
			map[string]map[string]string{
				"/app/acme/variable-sets":                                             {"name": "sneaky"},
				"/app/acme/variable-sets/" + vs.ID + "/variables":                     {"key": "SNEAKY", "value": "x", "category": "env"},
				"/app/acme/variable-sets/" + vs.ID + "/variables/" + v.ID + "/delete": nil,
				"/app/acme/variable-sets/" + scoped.ID + "/apply":                     {"target": prj.ID},
				"/app/acme/variable-sets/" + scoped.ID + "/remove":                    {"target": ws.ID},
				"/app/acme/variable-sets/" + vs.ID + "/delete":                        nil,
			}},
	} {
		if st := tb.open(pg.path); st != http.StatusOK {
			t.Fatalf("%s answers the member %d", pg.path, st)
		}
		if !tb.exists(pg.shown) {
			t.Fatalf("%s does not show the member %s", pg.path, pg.shown)
		}
		for _, f := range pg.forms {
			if tb.exists(f) {
				t.Errorf("%s offers the member %s", pg.path, f)
			}
		}
		for path, fields := range pg.posts {
			if st := postFrom(tb, path, fields); st != http.StatusForbidden {
				t.Errorf("the member's post to %s: %d, want 403", path, st)
			}
		}
	}

	// Nothing changed.
	if l, err := e.Client.Projects.List(ctx, "acme", nil); err != nil || len(l.Items) != 2 {
		t.Errorf("projects after the refused posts: %v %v", l, err)
	}
	if got, err := e.Client.Projects.Read(ctx, prj.ID); err != nil || got.Name != "infra" || got.Description != "as made" {
		t.Errorf("the project after the refused posts: %+v %v", got, err)
	}
	if l, err := e.Client.Teams.List(ctx, "acme", nil); err != nil || len(l.Items) != 3 {
		t.Errorf("teams after the refused posts: %v %v", l, err)
	}
	if got := teamUsers(t, e, ops.ID); len(got) != 1 || got[0] != "dev" {
		t.Errorf("the team's members after the refused posts: %v", got)
	}
	if l, err := e.Client.VariableSets.List(ctx, "acme", nil); err != nil || len(l.Items) != 2 {
		t.Errorf("variable sets after the refused posts: %v %v", l, err)
	}
	if vars := varsetVars(t, e, vs.ID); len(vars) != 1 || vars["REGION"] == nil {
		t.Errorf("the set's variables after the refused posts: %v", vars)
	}
	if got := varsetNamed(t, e, "acme", "scoped"); len(got.Workspaces) != 1 || got.Workspaces[0].ID != ws.ID || len(got.Projects) != 0 {
		t.Errorf("the scoped set after the refused posts applies to %v and %v", workspaceIDs(got.Workspaces), got.Projects)
	}
}
