package authz_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestWorkspaceListsShowWhatTheCallerMaySee: a workspace list names only
// the workspaces the caller could read one by one.
func TestWorkspaceListsShowWhatTheCallerMaySee(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		prj := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "data"}))(t)
		app := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")}))(t)
		must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("warehouse"), Project: prj}))(t)
		must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("secret")}))(t)

		devs := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("devs")}))(t)
		must(c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: devs, Workspace: app}))(t)
		must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: devs, Project: prj}))(t)
		dev, _ := e.UserClient(t, org.Name, "dev@acme.test", devs)
		nobody, _ := e.UserClient(t, org.Name, "nobody@acme.test")
		readers := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("auditors"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ReadWorkspaces: tfe.Bool(true)}}))(t)
		auditor := e.NewClient(t, must(c.TeamTokens.Create(ctx, readers.ID))(t).Token)

		names := func(cl *tfe.Client) map[string]bool {
			l := must(cl.Workspaces.List(ctx, org.Name, nil))(t)
			out := map[string]bool{}
			for _, w := range l.Items {
				out[w.Name] = true
			}
			return out
		}
		if got := names(dev); len(got) != 2 || !got["app"] || !got["warehouse"] {
			t.Errorf("a team with access to app and project data lists %v", got)
		}
		// The page and its total count only what the caller may read.
		l := must(dev.Workspaces.List(ctx, org.Name, &tfe.WorkspaceListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}}))(t)
		if l.TotalCount != 2 || l.TotalPages != 2 || len(l.Items) != 1 || l.Items[0].Name != "warehouse" {
			t.Errorf("a member's second page of one: total %d, pages %d, %d items (want warehouse, of 2)", l.TotalCount, l.TotalPages, len(l.Items))
		}
		if got := names(nobody); len(got) != 0 {
			t.Errorf("a member with no access lists %v", got)
		}
		if got := names(auditor); len(got) != 3 {
			t.Errorf("read-workspaces lists %v", got)
		}
		// manage-policy-overrides reads every workspace one by one (to
		// override their runs' policies), so lists them all.
		overriders := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("overriders"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManagePolicyOverrides: tfe.Bool(true)}}))(t)
		overrider := e.NewClient(t, must(c.TeamTokens.Create(ctx, overriders.ID))(t).Token)
		if _, err := overrider.Workspaces.Read(ctx, org.Name, "secret"); err != nil {
			t.Errorf("manage-policy-overrides reading a workspace: %v", err)
		}
		if got := names(overrider); len(got) != 3 {
			t.Errorf("manage-policy-overrides lists %v", got)
		}
		if got := names(c); len(got) != 3 {
			t.Errorf("the site admin lists %v", got)
		}
		if _, err := dev.Workspaces.Read(ctx, org.Name, "secret"); err != tfe.ErrResourceNotFound {
			t.Errorf("reading a workspace not granted: %v", err)
		}
	})
}

// TestProjectListShowsWhatTheCallerMayRead: the organization's project list
// names the projects the caller could read one by one (GET /projects/{id}),
// and its page and count hold only those: a team's project grants, or the
// organization's read-projects or manage-workspaces access for all. A
// grant on a workspace does not show its project, there as here.
func TestProjectListShowsWhatTheCallerMayRead(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		data := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "data"}))(t)
		web := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "web"}))(t)
		secret := must(c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "secret"}))(t)
		inSecret := must(c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("vault"), Project: secret}))(t)

		devs := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("devs")}))(t)
		must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: devs, Project: data}))(t)
		must(c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessWrite, Team: devs, Project: web}))(t)
		must(c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: devs, Workspace: inSecret}))(t)
		dev, _ := e.UserClient(t, org.Name, "dev@acme.test", devs)
		nobody, _ := e.UserClient(t, org.Name, "nobody@acme.test")
		readers := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("auditors"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ReadProjects: tfe.Bool(true)}}))(t)
		auditor := e.NewClient(t, must(c.TeamTokens.Create(ctx, readers.ID))(t).Token)

		names := func(cl *tfe.Client) map[string]bool {
			l := must(cl.Projects.List(ctx, org.Name, nil))(t)
			out := map[string]bool{}
			for _, p := range l.Items {
				out[p.Name] = true
			}
			return out
		}
		if got := names(dev); len(got) != 2 || !got["data"] || !got["web"] {
			t.Errorf("a team with grants on data and web lists %v", got)
		}
		if _, err := dev.Projects.Read(ctx, secret.ID); err != tfe.ErrResourceNotFound {
			t.Errorf("the team reading the project of a workspace it may read: %v, want not found (as in its list)", err)
		}
		l := must(dev.Projects.List(ctx, org.Name, &tfe.ProjectListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}}))(t)
		if l.TotalCount != 2 || l.TotalPages != 2 || len(l.Items) != 1 {
			t.Errorf("a member's second page of one: total %d, pages %d, %d items (want 1 of 2)", l.TotalCount, l.TotalPages, len(l.Items))
		}
		if l := must(dev.Projects.List(ctx, org.Name, &tfe.ProjectListOptions{Name: "secret"}))(t); len(l.Items) != 0 {
			t.Errorf("the team finds project secret by name (%d projects)", len(l.Items))
		}
		if got := names(nobody); len(got) != 0 {
			t.Errorf("a member with no access lists %v", got)
		}
		// read-projects reads them all, with the default project.
		if got := names(auditor); len(got) != 4 {
			t.Errorf("read-projects lists %v", got)
		}
		if got := names(c); len(got) != 4 {
			t.Errorf("the site admin lists %v", got)
		}
	})
}
