package stack_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/testenv"
)

// workspaceRuns lists a deployment workspace's runs, newest first.
func workspaceRuns(t *testing.T, c *tfe.Client, org, ws string) []*tfe.Run {
	t.Helper()
	ctx := context.Background()
	w, err := c.Workspaces.Read(ctx, org, ws)
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Runs.List(ctx, w.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestApprovedPlanIsApplied: approving a deployment's plan applies that
// saved plan (the run the operator saw), not a new plan, and the steps
// serve its artifacts; when the deployment's state changes between the
// plan and the approval, the approved plan is stale: the run fails with a
// diagnostic saying so and nothing of the plan is applied; a rerun of the
// group then plans and applies again without a new configuration.
func TestApprovedPlanIsApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "saved", "box", "")
		ws := "stack-" + st.ID + "-prod"

		// 1. Approve: the plan's own run applies.
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/manual", nil)
		if err != nil {
			t.Fatal(err)
		}
		prod := waitRun(t, c, groupRun(t, c, cfg.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod is %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		before := workspaceRuns(t, c, org.Name, ws)
		if len(before) != 1 || before[0].Status != tfe.RunPlannedAndSaved {
			t.Fatalf("prod's workspace before approval has runs %v, want one saved plan", runStatuses(before))
		}
		ss := steps(t, c, prod.ID)
		if err := c.StackDeploymentSteps.Advance(ctx, ss[0].ID); err != nil {
			t.Fatal(err)
		}
		prod = waitRun(t, c, prod.ID, is("succeeded", "failed"))
		if prod.Status != "succeeded" {
			t.Fatalf("prod ended %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		after := workspaceRuns(t, c, org.Name, ws)
		// The approved plan's run applied; the only other run is the
		// empty re-plan of the convergence check.
		if len(after) != 2 || after[1].ID != before[0].ID || after[1].Status != tfe.RunApplied || after[0].Status != tfe.RunPlannedAndFinished {
			t.Fatalf("prod's workspace after approval has runs %v, want the approved plan %s applied and an empty re-plan", runStatuses(after), before[0].ID)
		}

		// The steps' artifacts: the plan the first step made (and the
		// apply step applied), and the apply's own.
		ss = steps(t, c, prod.ID)
		if got := stepSummary(ss); got != "plan=completed apply=completed plan=completed" {
			t.Fatalf("prod steps = %s", got)
		}
		artifact := func(stepID string, name tfe.StackDeploymentStepArtifactType) (string, error) {
			rc, err := c.StackDeploymentSteps.Artifacts(ctx, stepID, name)
			if err != nil {
				return "", err
			}
			defer rc.Close()
			b, err := io.ReadAll(rc)
			return string(b), err
		}
		for _, a := range []struct {
			step int
			name tfe.StackDeploymentStepArtifactType
			want string
		}{
			{0, tfe.StackDeploymentStepArtifactPlanDescription, `"module.box.terraform_data.box"`},
			{0, tfe.StackDeploymentStepArtifactPlanDebugLog, "Plan: 1 to add"},
			{1, tfe.StackDeploymentStepArtifactPlanDescription, `"module.box.terraform_data.box"`},
			{1, tfe.StackDeploymentStepArtifactApplyDescription, `"resource-additions":1`},
			{1, tfe.StackDeploymentStepArtifactApplyDebugLog, "Apply complete! Resources: 1 added"},
			{2, tfe.StackDeploymentStepArtifactPlanDebugLog, "No changes"},
		} {
			got, err := artifact(ss[a.step].ID, a.name)
			if err != nil || !strings.Contains(got, a.want) {
				t.Errorf("step %d (%s) %s = %.300q, %v; want it to contain %q", a.step, ss[a.step].OperationType, a.name, got, err, a.want)
			}
		}
		if _, err := artifact(ss[0].ID, tfe.StackDeploymentStepArtifactApplyDescription); err == nil || !strings.Contains(err.Error(), "404") {
			t.Errorf("a plan step's apply-description: %v, want not found", err)
		}
		if _, err := artifact(ss[0].ID, "plan-json"); err == nil || !strings.Contains(err.Error(), "400") {
			t.Errorf("an unknown artifact: %v", err)
		}

		// 2. The world changes between plan and approval.
		next := copyDir(t, "testdata/manual")
		rewrite(t, next+"/main.tfdeploy.hcl", `name = "prod"`, `name = "prod-2"`)
		cfg2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, next, nil)
		if err != nil {
			t.Fatal(err)
		}
		prod2 := waitRun(t, c, groupRun(t, c, cfg2.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod2.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod's second run is %s; diagnostics: %s", prod2.Status, diagnostics(t, c, cfg2.ID))
		}
		saved := workspaceRuns(t, c, org.Name, ws)[0]
		if saved.Status != tfe.RunPlannedAndSaved {
			t.Fatalf("the second plan's run is %s, want planned_and_saved", saved.Status)
		}
		// The deployment's state changes meanwhile. Not by a person: the
		// workspace is the stack's, and only its deployment runs change
		// it (TestStackWorkspacesAreTheStacks); by the server itself, as a
		// change the stack did not make (a restored backup, say).
		w, err := c.Workspaces.Read(ctx, org.Name, ws)
		if err != nil {
			t.Fatal(err)
		}
		cvs, err := c.ConfigurationVersions.List(ctx, w.ID, nil)
		if err != nil || len(cvs.Items) == 0 {
			t.Fatalf("configuration versions of %s: %v, %v", ws, cvs, err)
		}
		server := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindOrganization, Organization: org.Name})
		mr, err := e.Server.Runs.CreateSystem(server, run.CreateOptions{WorkspaceID: w.ID, ConfigurationVersionID: cvs.Items[0].ID,
			AutoApply: tfe.Bool(true), Variables: []run.RunVar{{Key: "name", Value: `"by-hand"`}}})
		if err != nil {
			t.Fatal(err)
		}
		manual := &tfe.Run{ID: mr.ID}
		for deadline := time.Now().Add(3 * time.Minute); ; {
			manual, err = c.Runs.Read(ctx, manual.ID)
			if err != nil {
				t.Fatal(err)
			}
			if manual.Status == tfe.RunApplied {
				break
			}
			if manual.Status == tfe.RunErrored || time.Now().After(deadline) {
				t.Fatalf("the manual run is %s", manual.Status)
			}
			time.Sleep(200 * time.Millisecond)
		}
		current, err := c.StateVersions.ReadCurrent(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentSteps.Advance(ctx, steps(t, c, prod2.ID)[0].ID); err != nil {
			t.Fatal(err)
		}
		prod2 = waitRun(t, c, prod2.ID, is("succeeded", "failed"))
		if prod2.Status != "failed" {
			t.Fatalf("approving a stale plan: the run ended %s, want failed", prod2.Status)
		}
		if d := diagnostics(t, c, cfg2.ID); !strings.Contains(d, "is stale: the deployment's state changed after it was planned") || !strings.Contains(d, saved.ID) {
			t.Errorf("diagnostics = %s, want the stale plan named", d)
		}
		if r, err := c.Runs.Read(ctx, saved.ID); err != nil || r.Status != tfe.RunDiscarded {
			t.Errorf("the stale plan's run = %v, %v; want discarded", r.Status, err)
		}
		// Nothing was applied: the state is still the manual run's.
		if now, err := c.StateVersions.ReadCurrent(ctx, w.ID); err != nil || now.ID != current.ID {
			t.Errorf("current state after the stale approval = %v, %v; want %s unchanged", now, err, current.ID)
		}

		// 3. Rerun: the failed deployment plans again with its latest
		// configuration, without a new upload, and then applies.
		g1, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "prod_default")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, g1.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"prod"}}); err == nil || !strings.Contains(err.Error(), "only the latest can be rerun") {
			t.Errorf("rerunning an older configuration: %v, want a conflict", err)
		}
		g2, err := c.StackDeploymentGroups.ReadByName(ctx, cfg2.ID, "prod_default")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, g2.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"staging"}}); err == nil || !strings.Contains(err.Error(), `deployment "staging" is not in deployment group`) {
			t.Errorf("rerunning a deployment not in the group: %v", err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, g2.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"prod"}}); err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, g2.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"prod"}}); err == nil || !strings.Contains(err.Error(), "still has an unfinished run") {
			t.Errorf("rerunning while a run is unfinished: %v, want a conflict", err)
		}
		runs, err := c.StackDeploymentRuns.List(ctx, g2.ID, nil)
		if err != nil || len(runs.Items) != 2 {
			t.Fatalf("group runs after the rerun = %+v, %v; want 2", runs, err)
		}
		rerun := waitRun(t, c, runs.Items[1].ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if rerun.ID == prod2.ID || rerun.Status != "pre-deploying-pending-operator" {
			t.Fatalf("the rerun %s is %s", rerun.ID, rerun.Status)
		}
		if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, rerun.ID); err != nil {
			t.Fatal(err)
		}
		if rerun = waitRun(t, c, rerun.ID, is("succeeded", "failed")); rerun.Status != "succeeded" {
			t.Fatalf("the rerun ended %s; diagnostics: %s", rerun.Status, diagnostics(t, c, cfg2.ID))
		}
	})
}

func runStatuses(rs []*tfe.Run) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID+"="+string(r.Status))
	}
	return out
}
