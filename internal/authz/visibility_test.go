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
		if got := names(c); len(got) != 3 {
			t.Errorf("the site admin lists %v", got)
		}
		if _, err := dev.Workspaces.Read(ctx, org.Name, "secret"); err != tfe.ErrResourceNotFound {
			t.Errorf("reading a workspace not granted: %v", err)
		}
	})
}
