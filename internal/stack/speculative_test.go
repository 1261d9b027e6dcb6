package stack_test

import (
	"context"
	"io"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSpeculativeConfigurations: a speculative configuration (what a pull
// request uploads) plans every deployment it declares, once, as a
// plan-only run, and changes nothing: not a deployment that was never
// deployed (its plan runs against an empty state and it stays
// undeployed), not a deployment's pending run (which is still approved
// and applied after it), not the state, not the deployment's latest run.
// Its plans cannot be approved; they can be rerun.
func TestSpeculativeConfigurations(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "speculative", "box", "")
		ws := "stack-" + st.ID + "-prod"
		speculative := &tfe.CreateStackConfigurationOptions{SpeculativeEnabled: tfe.Bool(true)}
		if _, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", speculative); err == nil {
			t.Fatal("a speculative configuration was accepted by a stack without speculative-enabled")
		}
		if _, err := c.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{SpeculativeEnabled: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		planLog := func(stepID string) string {
			t.Helper()
			rc, err := c.StackDeploymentSteps.Artifacts(ctx, stepID, tfe.StackDeploymentStepArtifactPlanDebugLog)
			if err != nil {
				t.Fatalf("plan log of step %s: %v", stepID, err)
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		// specPlan waits for a speculative run to end and returns its one
		// step's plan log.
		specPlan := func(cfgID, runID string) string {
			t.Helper()
			r := waitRun(t, c, runID, is("succeeded", "failed", "abandoned"))
			if r.Status != "succeeded" {
				t.Fatalf("speculative run %s ended %s; diagnostics: %s", r.ID, r.Status, diagnostics(t, c, cfgID))
			}
			ss := steps(t, c, r.ID)
			if got := stepSummary(ss); got != "plan=completed" {
				t.Fatalf("speculative run %s has steps %s, want one completed plan", r.ID, got)
			}
			if err := c.StackDeploymentSteps.Advance(ctx, ss[0].ID); err == nil {
				t.Errorf("the plan of speculative run %s was approved", r.ID)
			}
			return planLog(ss[0].ID)
		}

		// 1. Never deployed: the plan runs against an empty state.
		a, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", speculative)
		if err != nil {
			t.Fatal(err)
		}
		if log := specPlan(a.ID, groupRun(t, c, a.ID, "prod_default").ID); !strings.Contains(log, "Plan: 1 to add") {
			t.Errorf("the first speculative plan's log = %.400q, want it to add the box", log)
		}
		runs := workspaceRuns(t, c, org.Name, ws)
		if len(runs) != 1 || !runs[0].PlanOnly || runs[0].Status != tfe.RunPlannedAndFinished {
			t.Fatalf("prod's workspace has runs %v (plan-only: %v), want one finished plan-only run", runStatuses(runs), len(runs) == 1 && runs[0].PlanOnly)
		}
		if _, err := c.StateVersions.ReadCurrent(ctx, runs[0].Workspace.ID); err == nil {
			t.Error("a speculative plan left a state")
		}
		if deps, err := c.StackDeployments.List(ctx, st.ID, nil); err != nil || len(deps.Items) != 0 {
			t.Errorf("after a speculative plan the stack has deployments %+v, %v; want none", deps, err)
		}

		// 2. A speculative plan while the deployment's own run waits for
		// approval leaves that run waiting; it is then applied.
		b, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
		if err != nil {
			t.Fatal(err)
		}
		prod := waitRun(t, c, groupRun(t, c, b.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod is %s; diagnostics: %s", prod.Status, diagnostics(t, c, b.ID))
		}
		renamed := copyDir(t, "testdata/manual")
		rewrite(t, renamed+"/main.tfdeploy.hcl", `name = "prod"`, `name = "prod-2"`)
		cfgC, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, renamed, speculative)
		if err != nil {
			t.Fatal(err)
		}
		if log := specPlan(cfgC.ID, groupRun(t, c, cfgC.ID, "prod_default").ID); !strings.Contains(log, "Plan: 1 to add") {
			t.Errorf("the second speculative plan's log = %.400q", log)
		}
		if r, err := c.StackDeploymentRuns.Read(ctx, prod.ID); err != nil || r.Status != "pre-deploying-pending-operator" {
			t.Fatalf("after a speculative plan prod's run is %+v, %v; want it still waiting", r, err)
		}
		if err := c.StackDeploymentSteps.Advance(ctx, steps(t, c, prod.ID)[0].ID); err != nil {
			t.Fatal(err)
		}
		if prod = waitRun(t, c, prod.ID, is("succeeded", "failed")); prod.Status != "succeeded" {
			t.Fatalf("prod ended %s; diagnostics: %s", prod.Status, diagnostics(t, c, b.ID))
		}
		sv, err := c.StateVersions.ReadCurrent(ctx, runs[0].Workspace.ID)
		if err != nil {
			t.Fatal(err)
		}

		// 3. A speculative plan of a change to a deployed deployment
		// shows the change and applies nothing; its group can be rerun.
		d, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, renamed, speculative)
		if err != nil {
			t.Fatal(err)
		}
		if log := specPlan(d.ID, groupRun(t, c, d.ID, "prod_default").ID); !strings.Contains(log, "Plan: 0 to add, 1 to change, 0 to destroy") {
			t.Errorf("the speculative plan of a change: log = %.400q", log)
		}
		g, err := c.StackDeploymentGroups.ReadByName(ctx, d.ID, "prod_default")
		if err != nil || g.Status != "succeeded" {
			t.Fatalf("the speculative configuration's group = %+v, %v; want succeeded", g, err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, g.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"prod"}}); err != nil {
			t.Fatalf("rerunning a speculative plan: %v", err)
		}
		reruns, err := c.StackDeploymentRuns.List(ctx, g.ID, nil)
		if err != nil || len(reruns.Items) != 2 {
			t.Fatalf("the group's runs after a rerun = %+v, %v", reruns, err)
		}
		if log := specPlan(d.ID, reruns.Items[1].ID); !strings.Contains(log, "1 to change") {
			t.Errorf("the rerun's plan log = %.400q", log)
		}
		after, err := c.StateVersions.ReadCurrent(ctx, runs[0].Workspace.ID)
		if err != nil || after.ID != sv.ID {
			t.Errorf("the current state after speculative plans = %+v, %v; want %s, unchanged", after, err, sv.ID)
		}
		// The deployment is at the run that applied, not at the newer
		// speculative plans.
		deps, err := c.StackDeployments.List(ctx, st.ID, nil)
		if err != nil || len(deps.Items) != 1 || deps.Items[0].LatestDeploymentRun == nil || deps.Items[0].LatestDeploymentRun.ID != prod.ID {
			t.Fatalf("the stack's deployments = %+v, %v; want prod at run %s", deps, err, prod.ID)
		}
		for _, r := range workspaceRuns(t, c, org.Name, ws) {
			if r.Status == tfe.RunApplied && r.PlanOnly {
				t.Errorf("plan-only run %s applied", r.ID)
			}
		}
	})
}
