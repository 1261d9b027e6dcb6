package stack_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// waitRun polls a deployment run until cond holds for its status.
func waitRun(t *testing.T, c *tfe.Client, id string, cond func(string) bool) *tfe.StackDeploymentRun {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		r, err := c.StackDeploymentRuns.Read(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if cond(string(r.Status)) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("deployment run %s is still %s", id, r.Status)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func is(statuses ...string) func(string) bool {
	return func(s string) bool {
		for _, x := range statuses {
			if s == x {
				return true
			}
		}
		return false
	}
}

func groupRun(t *testing.T, c *tfe.Client, cfgID, group string) *tfe.StackDeploymentRun {
	t.Helper()
	ctx := context.Background()
	g, err := c.StackDeploymentGroups.ReadByName(ctx, cfgID, group)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := c.StackDeploymentRuns.List(ctx, g.ID, nil)
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("runs of group %s = %+v, %v", group, runs, err)
	}
	return runs.Items[0]
}

func steps(t *testing.T, c *tfe.Client, runID string) []*tfe.StackDeploymentStep {
	t.Helper()
	l, err := c.StackDeploymentSteps.List(context.Background(), runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func stepSummary(ss []*tfe.StackDeploymentStep) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, s.OperationType+"="+string(s.Status))
	}
	return strings.Join(parts, " ")
}

func outputs(t *testing.T, c *tfe.Client, org, ws string) map[string]any {
	t.Helper()
	ctx := context.Background()
	w, err := c.Workspaces.Read(ctx, org, ws)
	if err != nil {
		t.Fatal(err)
	}
	sv, err := c.StateVersions.ReadCurrentWithOptions(ctx, w.ID, &tfe.StateVersionCurrentOptions{Include: []tfe.StateVersionIncludeOpt{tfe.SVoutputs}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	for _, o := range sv.Outputs {
		full, err := c.StateVersionOutputs.Read(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		out[o.Name] = full.Value
	}
	return out
}

// TestDeploymentRuns is the end-to-end path of a stack with two components
// (app reads network's output) and two deployments, through go-tfe and
// the real terraform binary on both stores: dev's group auto-approves
// plans that destroy nothing, so dev plans, applies and converges (an
// empty re-plan) by itself; prod waits for an operator, is approved with
// Advance and then converges the same way.
func TestDeploymentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "deploy")
		prj, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "platform"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/e2e", nil)
		if err != nil {
			t.Fatal(err)
		}
		dev := groupRun(t, c, cfg.ID, "auto")
		prod := groupRun(t, c, cfg.ID, "prod_default")

		dev = waitRun(t, c, dev.ID, is("succeeded", "failed"))
		if dev.Status != "succeeded" {
			t.Fatalf("dev ended %s; diagnostics: %s", dev.Status, diagnostics(t, c, cfg.ID))
		}
		if got := stepSummary(steps(t, c, dev.ID)); got != "plan=completed apply=completed plan=completed" {
			t.Errorf("dev steps = %s", got)
		}
		prod = waitRun(t, c, prod.ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if prod.Status != "pre-deploying-pending-operator" {
			t.Fatalf("prod is %s, want it waiting for an operator; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		ss := steps(t, c, prod.ID)
		if len(ss) != 1 || ss[0].Status != "pending-operator" {
			t.Fatalf("prod steps = %s", stepSummary(ss))
		}
		if g, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "prod_default"); err != nil || g.Status != "deploying" {
			t.Errorf("prod's group = %+v, %v", g, err)
		}
		// Nothing of prod exists before approval.
		if ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-prod"); err != nil || ws.ResourceCount != 0 {
			t.Errorf("prod's workspace before approval = %+v, %v", ws, err)
		}
		if err := c.StackDeploymentSteps.Advance(ctx, ss[0].ID); err != nil {
			t.Fatal(err)
		}
		prod = waitRun(t, c, prod.ID, is("succeeded", "failed"))
		if prod.Status != "succeeded" {
			t.Fatalf("prod ended %s; diagnostics: %s", prod.Status, diagnostics(t, c, cfg.ID))
		}
		if got := stepSummary(steps(t, c, prod.ID)); got != "plan=completed apply=completed plan=completed" {
			t.Errorf("prod steps = %s", got)
		}
		if g, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "prod_default"); err != nil || g.Status != "succeeded" {
			t.Errorf("prod's group = %+v, %v", g, err)
		}
		// Each deployment has its own state; app read network's output.
		out := outputs(t, c, org.Name, "stack-"+st.ID+"-prod")
		if b, _ := json.Marshal(out["app_ids"]); string(b) != `["prod-net/app-0","prod-net/app-1"]` {
			t.Errorf("prod outputs = %s", b)
		}
		out = outputs(t, c, org.Name, "stack-"+st.ID+"-dev")
		if b, _ := json.Marshal(out["app_ids"]); string(b) != `["dev-net/app-0"]` {
			t.Errorf("dev outputs = %s", b)
		}
		// Approving again is refused: nothing waits.
		if err := c.StackDeploymentSteps.Advance(ctx, ss[0].ID); err == nil {
			t.Error("a completed step was advanced")
		}
	})
}

func diagnostics(t *testing.T, c *tfe.Client, cfgID string) string {
	t.Helper()
	l, err := c.StackConfigurations.Diagnostics(context.Background(), cfgID)
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, d := range l.Items {
		parts = append(parts, d.Summary+": "+d.Detail)
	}
	return strings.Join(parts, " | ")
}
