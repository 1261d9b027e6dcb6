package stack_test

import (
	"context"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestStackWorkspacesAreTheStacks: a stack's deployment workspace is the
// stack's. People read it (its runs, its state), but neither the owners
// (the site token here) nor a team that writes to every workspace of the
// project apply or discard the plan waiting for the stack's approval,
// start a run, lock it, change its variables or settings: each is refused
// with the reason, and the permissions the API tells them say so. The
// stack's approval applies the plan, and the stack's own changes to the
// workspace (its engine) go in. Once the stack is deleted, the
// workspace it kept (it manages resources) is people's again.
func TestStackWorkspacesAreTheStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, prj, st := newStack(t, e, "managed", "box", "")
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
		if err != nil {
			t.Fatal(err)
		}
		prod := waitRun(t, c, groupRun(t, c, cfg.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod is %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-prod")
		if err != nil {
			t.Fatal(err)
		}
		saved := workspaceRuns(t, c, org.Name, ws.Name)[0]

		// A team that writes to the project's workspaces.
		team, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("writers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessWrite,
			Team: team, Project: prj}); err != nil {
			t.Fatal(err)
		}
		writer, _ := e.UserClient(t, org.Name, "writer@managed.test", team)

		for _, who := range []struct {
			name string
			c    *tfe.Client
		}{{"the site admin", c}, {"a project writer", writer}} {
			w, err := who.c.Workspaces.ReadByID(ctx, ws.ID)
			if err != nil {
				t.Fatalf("%s reads the workspace: %v", who.name, err)
			}
			if p := w.Permissions; p == nil || p.CanQueueRun || p.CanQueueApply || p.CanLock || p.CanUpdate || p.CanUpdateVariable || p.CanDestroy ||
				!p.CanReadStateVersions || !p.CanReadVariable {
				t.Errorf("%s is told permissions %+v on the stack's workspace, want reads only", who.name, p)
			}
			if _, err := who.c.Runs.Read(ctx, saved.ID); err != nil {
				t.Errorf("%s reads the saved plan's run: %v", who.name, err)
			}
			refused := func(what string, err error) {
				t.Helper()
				if err == nil || !strings.Contains(err.Error(), "forbidden") && !strings.Contains(err.Error(), "unauthorized") {
					t.Errorf("%s: %s: %v, want refused", who.name, what, err)
				}
			}
			refused("applying the plan the stack waits to approve", who.c.Runs.Apply(ctx, saved.ID, tfe.RunApplyOptions{}))
			refused("discarding it", who.c.Runs.Discard(ctx, saved.ID, tfe.RunDiscardOptions{}))
			_, err = who.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, AutoApply: tfe.Bool(true)})
			refused("starting a run", err)
			_, err = who.c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{})
			refused("locking", err)
			_, err = who.c.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("x"), Value: tfe.String("1"), Category: tfe.Category(tfe.CategoryTerraform)})
			refused("adding a variable", err)
			_, err = who.c.Workspaces.UpdateByID(ctx, ws.ID, tfe.WorkspaceUpdateOptions{AutoApply: tfe.Bool(true)})
			refused("changing its settings", err)
		}
		// The refusal says why.
		status, body := e.API(t, "", "POST", "/api/v2/runs/"+saved.ID+"/actions/apply", nil)
		if status != 403 || !strings.Contains(string(body), "deployment of stack "+st.ID) {
			t.Errorf("applying the stack's plan through the API: %d %s, want 403 naming the stack", status, body)
		}
		if r, err := c.Runs.Read(ctx, saved.ID); err != nil || r.Status != tfe.RunPlannedAndSaved {
			t.Fatalf("the saved plan after the refusals: %v, %v; want it still planned_and_saved", r, err)
		}

		// The stack's approval applies it.
		if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, prod.ID); err != nil {
			t.Fatal(err)
		}
		if prod = waitRun(t, c, prod.ID, is("succeeded", "failed")); prod.Status != "succeeded" {
			t.Fatalf("prod ended %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}

		// The stack's own changes to the workspace go in: a new engine
		// version is set on it by the next deployment run.
		setEngine(t, e, st.ID, testenv.Engines(t)[0].Version)
		cfg2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
		if err != nil {
			t.Fatal(err)
		}
		next := waitRun(t, c, groupRun(t, c, cfg2.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if next.Status == "failed" {
			t.Fatalf("the deployment run after the engine changed failed: %s", diagnostics(t, c, cfg2.ID))
		}
		if w, err := c.Workspaces.ReadByID(ctx, ws.ID); err != nil || w.TerraformVersion != testenv.Engines(t)[0].Version {
			t.Fatalf("the stack's workspace after the engine changed: %v, %v", w, err)
		}

		// Deleted, the stack keeps the workspace (it manages a resource),
		// which is people's again.
		if err := c.Stacks.ForceDelete(ctx, st.ID); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			_, err := c.Workspaces.UpdateByID(ctx, ws.ID, tfe.WorkspaceUpdateOptions{AutoApply: tfe.Bool(true)})
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("changing the workspace a deleted stack kept: %v", err)
			}
		}
	})
}

// TestStackDoesNotTakeOverAWorkspace: a workspace someone made with the
// name a deployment's workspace would have is not taken over (its mark is
// set when the stack creates it, and never changes): the deployment run
// fails saying so, and the workspace stays its owner's.
func TestStackDoesNotTakeOverAWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	org, prj, st := newStack(t, e, "squat", "box", "")
	name := "stack-" + st.ID + "-prod"
	mine, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String(name), Project: prj})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
	if err != nil {
		t.Fatal(err)
	}
	prod := waitRun(t, c, groupRun(t, c, cfg.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
	if prod.Status != "failed" {
		t.Fatalf("prod is %s, want failed: its workspace's name is taken", prod.Status)
	}
	if d := diagnostics(t, c, cfg.ID); !strings.Contains(d, "exists and is not this stack's deployment") {
		t.Errorf("diagnostics = %s, want the taken workspace named", d)
	}
	if _, err := c.Workspaces.UpdateByID(ctx, mine.ID, tfe.WorkspaceUpdateOptions{AutoApply: tfe.Bool(true)}); err != nil {
		t.Errorf("the workspace's owner changing it after the stack's run: %v", err)
	}
}
