package run_test

import (
	"context"
	"io"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestUnreachedPhases: a run that ends without reaching a phase (a
// discarded run's apply, a plan-only run's apply, an errored plan's apply)
// shows that phase unreachable, as HCP Terraform does, and go-tfe's reader
// of that phase's log, which polls the phase until its status is final,
// ends instead of waiting forever.
func TestUnreachedPhases(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)

	unreached := func(name, runID string) {
		t.Helper()
		r, err := e.Client.Runs.ReadWithOptions(ctx, runID, &tfe.RunReadOptions{Include: []tfe.RunIncludeOpt{tfe.RunApply}})
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.Client.Applies.Read(ctx, r.Apply.ID)
		if err != nil {
			t.Fatal(err)
		}
		if a.Status != tfe.ApplyUnreachable {
			t.Errorf("%s: the apply is %q, want unreachable", name, a.Status)
		}
		lctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		logs, err := e.Client.Applies.Logs(lctx, a.ID)
		if err != nil {
			t.Fatalf("%s: the apply's logs: %v", name, err)
		}
		if _, err := io.ReadAll(logs); err != nil {
			t.Errorf("%s: reading the apply's log: %v, want its end", name, err)
		}
	}

	// Discarded after its plan.
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunPlanned)
	if err := e.Client.Runs.Discard(ctx, r.ID, tfe.RunDiscardOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunDiscarded)
	unreached("a discarded run", r.ID)

	// Plan only.
	r, err = e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, PlanOnly: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunPlannedAndFinished)
	unreached("a plan-only run", r.ID)

	// A plan that errors.
	testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" { input = var.missing }`)
	r, err = e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunErrored)
	unreached("an errored plan", r.ID)
}
