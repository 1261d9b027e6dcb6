package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunReadRoundTrips pins what one go-tfe Runs.Read by an organization
// member costs in store round trips: the token; the run with its
// events, comments and task stages in one statement (run readDocument),
// read once (the authorization guard and the handler share it through the
// request memo), with its workspace's project for the guard in the same
// statement. Clients poll this read while
// a run goes on (terraform's cloud backend, the UI, bench (a)), so each
// query is paid many times a run. What the one statement shows is what the
// events, comments and task stages endpoints list, and a read after a
// change sees the change: the memo lives one request.
func TestRunReadRoundTrips(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "rr")
		owners := ownersTeam(t, e, "rr")
		c, _ := e.UserClient(t, "rr", "reader@rr.test", owners)
		ws, err := e.Client.Workspaces.Create(ctx, "rr", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
		if err != nil {
			t.Fatal(err)
		}
		// A task at pre-apply: the run has a task stage from its start,
		// and it plans without calling the task (the service answers only
		// the task's verification).
		svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
		t.Cleanup(svc.Close)
		task, err := e.Client.RunTasks.Create(ctx, "rr", tfe.RunTaskCreateOptions{Name: "gate", URL: svc.URL, Category: "task"})
		if err != nil {
			t.Fatal(err)
		}
		stages := []tfe.Stage{tfe.PreApply}
		if _, err := e.Client.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Advisory, Stages: &stages, RunTask: task}); err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "a" {}`)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitRun(ctx, t, c, r.ID, tfe.RunPlanned)
		comment, err := c.Comments.Create(ctx, r.ID, tfe.CommentCreateOptions{Body: "looks right"})
		if err != nil {
			t.Fatal(err)
		}
		events, err := c.RunEvents.List(ctx, r.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		listed, err := c.TaskStages.List(ctx, r.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(listed.Items) != 1 {
			t.Fatalf("the run has %d task stages, want the pre-apply one", len(listed.Items))
		}
		least := int64(1 << 30)
		for i := range 10 {
			var got *tfe.Run
			least = min(least, e.RequestStatements(t, func() { got, err = c.Runs.Read(ctx, r.ID) }))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tfe.RunPlanned || got.Permissions == nil || !got.Permissions.CanApply {
				t.Fatalf("read %d: status %s, permissions %+v", i, got.Status, got.Permissions)
			}
			if len(got.RunEvents) != len(events.Items) || len(got.RunEvents) == 0 {
				t.Fatalf("read %d: %d events, the events endpoint lists %d", i, len(got.RunEvents), len(events.Items))
			}
			for j, ev := range events.Items {
				if got.RunEvents[j].ID != ev.ID {
					t.Fatalf("read %d: event %d is %s, the events endpoint says %s", i, j, got.RunEvents[j].ID, ev.ID)
				}
			}
			if len(got.Comments) != 1 || got.Comments[0].ID != comment.ID {
				t.Fatalf("read %d: comments %v, want %s", i, got.Comments, comment.ID)
			}
			if len(got.TaskStages) != 1 || got.TaskStages[0].ID != listed.Items[0].ID {
				t.Fatalf("read %d: task stages %v, want %s", i, got.TaskStages, listed.Items[0].ID)
			}
		}
		// Before, the guard and the handler each read the run, and its
		// events and task stages were two more queries, and the guard read
		// the run's workspace: 6.
		if least > 2 {
			t.Errorf("a run read costs %d store queries, want at most 2", least)
		}
		// A page of the workspace's runs: the token, the workspace (its
		// identity for the access check; the guard's read shares it), the
		// run count, the page, and the page's events and task stages
		// (one statement each for the whole page). It was 9: the list's
		// access check worked out the workspace's effective execution mode.
		least = leastStatements(t, e, func() {
			l, err := c.Runs.List(ctx, ws.ID, nil)
			if err != nil || len(l.Items) != 1 || l.Items[0].ID != r.ID || len(l.Items[0].RunEvents) != len(events.Items) {
				t.Fatalf("the workspace's runs: %v, %+v", err, l)
			}
		})
		if least > 6 {
			t.Errorf("a page of runs costs %d store queries, want at most 6", least)
		}
		if err := c.Runs.Discard(ctx, r.ID, tfe.RunDiscardOptions{}); err != nil {
			t.Fatal(err)
		}
		if got, err := c.Runs.Read(ctx, r.ID); err != nil || got.Status != tfe.RunDiscarded {
			t.Fatalf("a read after the discard: %v, %v", got, err)
		}
	})
}

// TestPlanReadRoundTrips: a plan's or an apply's read (go-tfe Plans.Read
// and Applies.Read, which terraform's cloud backend makes for every run
// it follows, for the log's URL) reads the run that owns it once, with
// its workspace's project for the guard: the authorization guard and the
// handler share it.
func TestPlanReadRoundTrips(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "pr")
		c, _ := e.UserClient(t, "pr", "reader@pr.test", ownersTeam(t, e, "pr"))
		ws, r := appliedRun(t, e, "pr", `resource "terraform_data" "a" {}`)
		for _, read := range []struct {
			name string
			do   func() (string, error)
		}{
			{"plan", func() (string, error) {
				p, err := c.Plans.Read(ctx, r.Plan.ID)
				if err == nil && (p.ResourceAdditions != 1 || p.LogReadURL == "") {
					t.Fatalf("the plan: %+v", p)
				}
				return string(p.Status), err
			}},
			{"apply", func() (string, error) {
				a, err := c.Applies.Read(ctx, r.Apply.ID)
				if err == nil && (a.ResourceAdditions != 1 || a.LogReadURL == "") {
					t.Fatalf("the apply: %+v", a)
				}
				return string(a.Status), err
			}},
		} {
			least := leastStatements(t, e, func() {
				status, err := read.do()
				if err != nil || status != "finished" {
					t.Fatalf("the %s: %s, %v", read.name, status, err)
				}
			})
			// The token, and the run with its workspace's project for the
			// guard: before, the guard read the run and its workspace,
			// and the handler the run again (4).
			if least > 2 {
				t.Errorf("the %s's read costs %d store queries, want at most 2", read.name, least)
			}
		}
		// The guard decides on the project the run's read took along: a
		// team with read access to the workspace's project reads the
		// plan, a member without access to it does not see it.
		readers, err := e.Client.Teams.Create(ctx, "pr", tfe.TeamCreateOptions{Name: tfe.String("readers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: readers, Project: &tfe.Project{ID: ws.Project.ID}}); err != nil {
			t.Fatal(err)
		}
		others, err := e.Client.Teams.Create(ctx, "pr", tfe.TeamCreateOptions{Name: tfe.String("others")})
		if err != nil {
			t.Fatal(err)
		}
		reader, _ := e.UserClient(t, "pr", "project-reader@pr.test", readers)
		outsider, _ := e.UserClient(t, "pr", "outsider@pr.test", others)
		if p, err := reader.Plans.Read(ctx, r.Plan.ID); err != nil || p.ID != r.Plan.ID {
			t.Fatalf("a project reader's plan read: %v", err)
		}
		if _, err := reader.Applies.Read(ctx, r.Apply.ID); err != nil {
			t.Fatalf("a project reader's apply read: %v", err)
		}
		if _, err := outsider.Plans.Read(ctx, r.Plan.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a member without access read the plan: %v, want not found", err)
		}
		if _, err := outsider.Applies.Read(ctx, r.Apply.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a member without access read the apply: %v, want not found", err)
		}
	})
}
