package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunComments, events, search and force-execute through go-tfe, as
// its run tests use them: a comment is a "commented" run event with its
// actor and comment includable; force-execute discards the planned run
// that holds the workspace and starts the pending one.
func TestRunCommentsAndForceExecute(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t) // needs terraform on PATH
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			testRunCommentsAndForceExecute(t, testenv.New(t, testenv.Options{Store: st}))
		})
	}
}

func testRunCommentsAndForceExecute(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	org, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	cv, err := c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"main.tf": `resource "terraform_data" "a" { input = "x" }`})
	if err := c.ConfigurationVersions.Upload(ctx, cv.UploadURL, dir); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		cv, err = c.ConfigurationVersions.Read(ctx, cv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cv.Status == tfe.ConfigurationUploaded {
			break
		}
		if i > 100 {
			t.Fatalf("configuration version is %s", cv.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	first, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	waitRun(ctx, t, c, first.ID, 2*time.Minute, tfe.RunPlanned)

	// The unredacted plan JSON holds sensitive values: admins of the
	// workspace only (owners, a team with admin access), as HCP Terraform
	// documents it. A member of a team with read or write access still
	// gets the redacted one.
	planned, err := c.Runs.Read(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	readers, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("readers")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: readers, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	member, _ := e.UserClient(t, org.Name, "dev@acme.test", readers)
	if _, err := member.Plans.ReadJSONOutput(ctx, planned.Plan.ID); err == nil || !strings.Contains(strings.ToLower(err.Error()), "forbidden") {
		t.Fatalf("a member read the unredacted plan JSON: %v", err)
	}
	if _, err := c.Plans.ReadJSONOutput(ctx, planned.Plan.ID); err != nil {
		t.Fatalf("an owner could not read the plan JSON: %v", err)
	}
	for _, level := range []tfe.AccessType{tfe.AccessWrite, tfe.AccessAdmin} {
		tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("team-" + string(level))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(level), Team: tm, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		user, _ := e.UserClient(t, org.Name, string(level)+"@acme.test", tm)
		_, err = user.Plans.ReadJSONOutput(ctx, planned.Plan.ID)
		if level == tfe.AccessAdmin && err != nil {
			t.Fatalf("a workspace admin could not read the plan JSON: %v", err)
		}
		if level != tfe.AccessAdmin && (err == nil || !strings.Contains(strings.ToLower(err.Error()), "forbidden")) {
			t.Fatalf("a member with %s access read the unredacted plan JSON: %v", level, err)
		}
	}
	for _, who := range []*tfe.Client{c, member} {
		if b, err := redactedPlanJSON(ctx, who, planned.Plan.ID); err != nil || !json.Valid(b) {
			t.Fatalf("reading the redacted plan JSON: %v", err)
		}
	}
	second, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if second.Status != tfe.RunPending {
		t.Fatalf("a second run is %s while the first waits for confirmation, want pending", second.Status)
	}

	// Comments and events.
	cm, err := c.Comments.Create(ctx, second.ID, tfe.CommentCreateOptions{Body: "go ahead"})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.RunEvents.List(ctx, second.ID, &tfe.RunEventListOptions{Include: []tfe.RunEventIncludeOpt{tfe.RunEventActor, tfe.RunEventComment}})
	if err != nil {
		t.Fatal(err)
	}
	var commented *tfe.RunEvent
	for _, ev := range evs.Items {
		if ev.Action == "commented" {
			commented = ev
		}
	}
	if commented == nil || commented.Comment == nil || commented.Comment.ID != cm.ID || commented.Comment.Body != "go ahead" {
		t.Fatalf("no commented event with its comment included: %+v", commented)
	}
	if commented.Actor == nil || commented.Actor.Username == "" {
		t.Fatalf("the commented event's actor is not included: %+v", commented.Actor)
	}
	r, err := c.Runs.Read(ctx, second.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Comments) != 1 || r.Comments[0].ID != cm.ID || len(r.RunEvents) < 2 {
		t.Fatalf("run relationships: comments %v, %d events", r.Comments, len(r.RunEvents))
	}
	if _, err := c.Comments.Create(ctx, second.ID, tfe.CommentCreateOptions{Body: " "}); err == nil {
		t.Fatal("a blank comment was accepted")
	}

	// search[user] filters by the creator.
	me, err := c.Users.ReadCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]int{me.Username: 2, "nobody-" + me.Username: 0} {
		rl, err := c.Runs.List(ctx, ws.ID, &tfe.RunListOptions{User: user})
		if err != nil {
			t.Fatal(err)
		}
		if len(rl.Items) != want {
			t.Fatalf("search[user]=%s: %d runs, want %d", user, len(rl.Items), want)
		}
	}

	// Force-execute: the planned run is discarded, the pending one starts.
	if err := c.Runs.ForceExecute(ctx, first.ID); err == nil {
		t.Fatal("a planned run was force-executed")
	}
	if err := c.Runs.ForceExecute(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if r, _ := c.Runs.Read(ctx, first.ID); r == nil || r.Status != tfe.RunDiscarded {
		t.Fatalf("the run ahead is %v after a force-execute, want discarded", r)
	}
	waitRun(ctx, t, c, second.ID, 2*time.Minute, tfe.RunPlanned)

	// A cancel asked for shows when a force-cancel becomes possible.
	third, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Runs.Cancel(ctx, third.ID, tfe.RunCancelOptions{Comment: tfe.String("not now")}); err != nil {
		t.Fatal(err)
	}
	r, err = c.Runs.Read(ctx, third.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != tfe.RunCanceled || r.ForceCancelAvailableAt.IsZero() || r.Actions.IsForceCancelable || len(r.Comments) != 1 {
		t.Fatalf("a canceled pending run: status %s, force-cancel-available-at %v, force-cancelable %v, %d comments",
			r.Status, r.ForceCancelAvailableAt, r.Actions.IsForceCancelable, len(r.Comments))
	}
}
