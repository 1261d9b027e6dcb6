package server_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunCreateRoundTrips pins what a go-tfe Runs.Create costs in store
// statements: the authorization guard, the
// handler and the audit record share what they read before the request's
// first write (the request memo until the write), so the workspace and
// the configuration version are read once each. The workspace is locked,
// so the runs wait and nothing else runs meanwhile.
func TestRunCreateRoundTrips(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "wc")
		ws, err := e.Client.Workspaces.Create(ctx, "wc", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}`)
		if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		var runs []*tfe.Run
		least := leastStatements(t, e, func() {
			r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		})
		// Before the transaction: the token (the authentication epoch), the
		// workspace and the configuration version once each, and the
		// execution mode the workspace inherits from its project (one
		// statement). After it: the notification configurations, the
		// queue count, the run's events and task stages for the response,
		// and the audit record (one statement: the guard found the
		// workspace's organization before the write, and the event finds
		// the organization's ID itself). It was 16 before writing requests
		// had their memo, 13 before the event found its organization's
		// ID, 12 while the inherited mode took the project, its tag
		// bindings and its organization one by one, and 10 while the audit
		// read the workspace again after the write. In the transaction
		// (counted too since tests count a request's own statements
		// exactly, 2026-12-02): the run, the workspace's run count, the
		// run's first event, the organization's run tasks and policy sets,
		// the variables of the workspace's last run, and the queue's
		// update of the workspace and the run: 8, 17 in all.
		if least > 17 {
			t.Errorf("a run's creation costs %d store statements, want at most 17 (9 outside its transaction)", least)
		}
		// What the memo kept did not leak into what was written: each run
		// is its own, waiting behind the lock, on the configuration given.
		for i, r := range runs {
			got, err := e.Client.Runs.Read(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tfe.RunPending || got.ConfigurationVersion == nil || got.ConfigurationVersion.ID != cv.ID {
				t.Fatalf("run %d: status %s, configuration %+v; want pending on %s", i, got.Status, got.ConfigurationVersion, cv.ID)
			}
		}
		// The audit record of each creation is the workspace's
		// organization's, found by the authorization guard before the
		// write (the response names the run's workspace).
		org, err := e.Client.Organizations.Read(ctx, "wc")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			var name, id string
			if err := e.Server.DB.QueryRow(ctx, `SELECT organization_name, organization_id FROM audit_events WHERE resource_type = 'run' AND resource_id = ? AND action = 'create'`, r.ID).Scan(&name, &id); err != nil {
				t.Fatalf("the audit record of run %s's creation: %v", r.ID, err)
			}
			if name != "wc" || id != org.ExternalID {
				t.Fatalf("run %s's creation is recorded in organization %q (%q), want wc (%s)", r.ID, name, id, org.ExternalID)
			}
		}
		// The execution mode the run domain is given is the one the
		// workspace inherits (read in one statement): a project on local
		// execution refuses runs, one on remote execution takes them
		// whatever its organization's default.
		if _, err := e.Client.Projects.Update(ctx, ws.Project.ID, tfe.ProjectUpdateOptions{DefaultExecutionMode: tfe.String("local")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}); err == nil || !strings.Contains(err.Error(), "local execution") {
			t.Fatalf("a run in a workspace inheriting local execution: %v", err)
		}
		if _, err := e.Client.Organizations.Update(ctx, "wc", tfe.OrganizationUpdateOptions{DefaultExecutionMode: tfe.String("local")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Projects.Update(ctx, ws.Project.ID, tfe.ProjectUpdateOptions{DefaultExecutionMode: tfe.String("remote")}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}); err != nil {
			t.Fatalf("a run in a workspace inheriting its project's remote execution: %v", err)
		}
	})
}

// TestRunCreateByTeamRoundTrips: a run created with a team's token is
// decided once, by the run service (authz.CreateRunAction); the
// authorization guard only locates the workspace
// (authz.Route.ServiceDecides). The least of several creations counts.
func TestRunCreateByTeamRoundTrips(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "wt")
		ws, err := e.Client.Workspaces.Create(ctx, "wt", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		writers, err := e.Client.Teams.Create(ctx, "wt", tfe.TeamCreateOptions{Name: tfe.String("writers"), Visibility: tfe.String("organization")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessWrite), Team: writers, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		tok, err := e.Client.TeamTokens.Create(ctx, writers.ID)
		if err != nil {
			t.Fatal(err)
		}
		team := e.NewClient(t, tok.Token)
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}`)
		if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		least := leastStatements(t, e, func() {
			if _, err := team.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv}); err != nil {
				t.Fatal(err)
			}
		})
		// TestRunCreateRoundTrips' 17 for a site admin, and what a team's
		// decision reads: its team once (the request memo keeps it until
		// the write), its grants on the workspace and on the workspace's
		// project before the write, and the three again for the
		// response's permissions after it. It was 17 while the guard
		// decided too, reading the grants a second time (statements
		// outside the transaction).
		if least > 23 {
			t.Errorf("a run's creation with a team token costs %d store statements, want at most 23 (15 outside its transaction)", least)
		}
	})
}
