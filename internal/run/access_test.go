package run_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunListAsksTheWorkspaceDomain: a workspace's run list asks the
// workspace domain whether the caller may see the workspace, not only the
// API's guard. Called directly, as a team of another organization, it
// answers 404 and no runs; as a team with read access, the run. (The
// domain's own check is the organization's, as workspace.Get's; access to
// the workspace within it is the guard's decision, from the authz model.)
func TestRunListAsksTheWorkspaceDomain(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "runlist")
		ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "x" {}`)
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		team := func(name string) string {
			tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			return tm.ID
		}
		readers := team("readers")
		other := testenv.NewOrg(t, c, "runlist-other")
		tm, err := c.Teams.Create(ctx, other.Name, tfe.TeamCreateOptions{Name: tfe.String("outsiders")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: &tfe.Team{ID: readers}, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		as := func(teamID, org string) context.Context {
			p := &auth.Principal{Kind: auth.KindTeam, TeamID: teamID, Organization: org}
			return authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		}
		runs, total, err := e.Server.Runs.ListPage(as(tm.ID, other.Name), ws.ID, run.ListOptions{Limit: 20})
		if core.KindOf(err) != core.KindNotFound || len(runs) != 0 || total != 0 {
			t.Errorf("a team of another organization listing the workspace's runs: %d runs (total %d), %v; want not found", len(runs), total, err)
		}
		runs, total, err = e.Server.Runs.ListPage(as(readers, org.Name), ws.ID, run.ListOptions{Limit: 20})
		if err != nil || total != 1 || len(runs) != 1 || runs[0].ID != r.ID {
			t.Errorf("a team with read access listing the workspace's runs: %d runs (total %d), %v; want %s", len(runs), total, err, r.ID)
		}
	})
}
