package stack_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAbandonedPlansAreReleased: approving a newer plan abandons the
// older pending one, and its saved plan does not linger (its run is
// discarded and its plan file deleted); an approved plan whose workspace
// stays locked fails after the server's --stack-apply-wait with a
// diagnostic saying so, instead of retrying forever, and its saved plan
// is discarded too.
func TestAbandonedPlansAreReleased(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	for _, store := range testenv.Stores {
		t.Run(store, func(t *testing.T) {
			e := testenv.New(t, testenv.Options{Store: store, Configure: func(c *server.Config) { c.StackApplyWait = 2 * time.Second }})
			ctx := context.Background()
			c := e.Client
			org, _, st := newStack(t, e, "release", "box", "")
			ws := "stack-" + st.ID + "-prod"

			cfg1, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
			if err != nil {
				t.Fatal(err)
			}
			prod1 := waitRun(t, c, groupRun(t, c, cfg1.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
			if prod1.Status != "pre-deploying-pending-operator" {
				t.Fatalf("prod's first run is %s: %s", prod1.Status, diagnostics(t, c, cfg1.ID))
			}
			dir := copyDir(t, "testdata/manual")
			rewrite(t, dir+"/main.tfdeploy.hcl", `name = "prod"`, `name = "prod-2"`)
			cfg2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			prod2 := waitRun(t, c, groupRun(t, c, cfg2.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
			if prod2.Status != "pre-deploying-pending-operator" {
				t.Fatalf("prod's second run is %s: %s", prod2.Status, diagnostics(t, c, cfg2.ID))
			}
			runs := workspaceRuns(t, c, org.Name, ws)
			if len(runs) != 2 || runs[0].Status != tfe.RunPlannedAndSaved || runs[1].Status != tfe.RunPlannedAndSaved {
				t.Fatalf("prod's workspace has runs %v, want two saved plans", runStatuses(runs))
			}
			second, first := runs[0], runs[1]
			for _, r := range runs {
				if _, err := planFile(t, e, r.ID); err != nil {
					t.Fatalf("saved plan %s has no plan file before approval: %v", r.ID, err)
				}
			}

			// Something holds the workspace: the approved plan cannot
			// apply. (Not a person: the workspace is the stack's, which
			// people only read; the server itself, no authorization model
			// in its context.)
			w, err := c.Workspaces.Read(ctx, org.Name, ws)
			if err != nil {
				t.Fatal(err)
			}
			me, err := c.Users.ReadCurrent(ctx)
			if err != nil {
				t.Fatal(err)
			}
			server := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, UserID: me.ID, Username: me.Username, SiteAdmin: true})
			if _, err := e.Server.Workspaces.Lock(server, w.ID, "maintenance"); err != nil {
				t.Fatal(err)
			}
			if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, prod2.ID); err != nil {
				t.Fatal(err)
			}
			if r := waitRun(t, c, prod1.ID, is("abandoned", "succeeded", "failed")); r.Status != "abandoned" {
				t.Errorf("prod's first run = %s, want abandoned", r.Status)
			}
			waitDiscarded(t, e, first.ID)

			prod2 = waitRun(t, c, prod2.ID, is("succeeded", "failed"))
			if prod2.Status != "failed" {
				t.Fatalf("prod's second run ended %s, want failed: its workspace is locked", prod2.Status)
			}
			if d := diagnostics(t, c, cfg2.ID); !strings.Contains(d, "stayed busy or locked for") || !strings.Contains(d, second.ID) {
				t.Errorf("diagnostics = %s, want the busy workspace and the plan %s named", d, second.ID)
			}
			waitDiscarded(t, e, second.ID)
			if got := stepSummary(steps(t, c, prod1.ID)); got != "plan=abandoned" {
				t.Errorf("prod's first run's steps = %s", got)
			}
			// Nothing was applied.
			if w, err = c.Workspaces.Read(ctx, org.Name, ws); err != nil || w.ResourceCount != 0 {
				t.Errorf("prod's workspace: %v resources, %v", w.ResourceCount, err)
			}
		})
	}
}

// planFile reads the saved plan file a run keeps for its apply.
func planFile(t *testing.T, e *testenv.Env, runID string) ([]byte, error) {
	t.Helper()
	r, err := e.Client.Runs.Read(context.Background(), runID)
	if err != nil || r.Plan == nil {
		t.Fatalf("reading run %s: %v", runID, err)
	}
	return e.Server.Runs.PlanBlob(context.Background(), r.Plan.ID, "tfplan")
}

// waitDiscarded waits until a saved plan's run is discarded and its plan
// file is gone.
func waitDiscarded(t *testing.T, e *testenv.Env, runID string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		r, err := e.Client.Runs.Read(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		_, ferr := planFile(t, e, runID)
		if r.Status == tfe.RunDiscarded && errors.Is(ferr, core.ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s (plan file: %v); want discarded with its plan file deleted", runID, r.Status, ferr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
