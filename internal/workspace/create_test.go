package workspace_test

import (
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestCreatingAWorkspaceWithAProjectGrant: a team whose project grant
// creates workspaces (maintain, admin, custom with create) creates them in
// that project through POST /organizations/{org}/workspaces, as in HCP
// Terraform, and nowhere else. The route used to ask for manage-workspaces
// in the whole organization, so such a team could create none.
func TestCreatingAWorkspaceWithAProjectGrant(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := newOrg(t, c, "acme").Name
		project := func(name string) *tfe.Project {
			p, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		mine, readable, hidden := project("mine"), project("readable"), project("hidden")
		platform, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("platform")})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []struct {
			p      *tfe.Project
			access tfe.TeamProjectAccessType
		}{{mine, tfe.TeamProjectAccessMaintain}, {readable, tfe.TeamProjectAccessRead}} {
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: g.access, Team: platform, Project: g.p}); err != nil {
				t.Fatal(err)
			}
		}
		pat, _ := e.UserClient(t, org, "pat@acme.test", platform)

		o, err := pat.Organizations.Read(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		if !o.Permissions.CanCreateWorkspace {
			t.Error("the organization's can-create-workspace is false for a team that creates workspaces in a project")
		}
		w, err := pat.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: &tfe.Project{ID: mine.ID}})
		if err != nil {
			t.Fatalf("creating a workspace in the project the team maintains: %v", err)
		}
		if w.Project == nil || w.Project.ID != mine.ID {
			t.Fatalf("the workspace is in %+v, want %s", w.Project, mine.ID)
		}

		_, err = pat.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("in-default")})
		testenv.WantStatus(t, "creating a workspace in the default project", err, "may not create workspaces")
		_, err = pat.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("in-readable"), Project: &tfe.Project{ID: readable.ID}})
		testenv.WantStatus(t, "creating a workspace in a project the team may only read", err, "may not create workspaces")
		_, err = pat.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("in-hidden"), Project: &tfe.Project{ID: hidden.ID}})
		testenv.WantErr(t, "creating a workspace in a project the team cannot see", err, tfe.ErrResourceNotFound)
		for _, name := range []string{"in-default", "in-readable", "in-hidden"} {
			if status, body := e.API(t, "", "GET", "/api/v2/organizations/"+org+"/workspaces/"+name, nil); status != http.StatusNotFound {
				t.Errorf("the refused workspace %s exists: %d %s", name, status, body)
			}
		}

		// A member with no grant creates none, and is told so.
		nobody, _ := e.UserClient(t, org, "nobody@acme.test")
		_, err = nobody.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("nope"), Project: &tfe.Project{ID: mine.ID}})
		if err == nil {
			t.Fatal("a member without any grant created a workspace")
		}
	})
}
