package stack_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSelectedDeployments: a configuration created with
// selected-deployments (go-tfe's CreateStackConfigurationOptions) runs
// only those deployments; the others get no run until their group is
// rerun. A selected name the configuration does not declare fails it
// with a diagnostic; a malformed selection is refused.
func TestSelectedDeployments(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "selected", "web", "")

		for bad, want := range map[string]string{"dev,dev": `names "dev" twice`, "not a name": `"not a name" is not a deployment name`} {
			// go-tfe's error for a 422 says "invalid attribute".
			if _, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/e2e", &tfe.CreateStackConfigurationOptions{SelectedDeployments: strings.Split(bad, ",")}); err == nil ||
				!strings.Contains(err.Error(), "invalid attribute") || !strings.Contains(err.Error(), want) {
				t.Errorf("selected-deployments %q: %v, want it refused saying %s", bad, err, want)
			}
		}
		unknown, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/e2e", &tfe.CreateStackConfigurationOptions{SelectedDeployments: []string{"dev", "qa"}})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.StackConfigurations.Read(ctx, unknown.ID); err != nil || got.Status != tfe.StackConfigurationStatusFailed ||
			!strings.Contains(diagnostics(t, c, unknown.ID), `"qa"`) {
			t.Fatalf("a selection naming an undeclared deployment: %+v, %v; diagnostics: %s", got, err, diagnostics(t, c, unknown.ID))
		}

		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/e2e", &tfe.CreateStackConfigurationOptions{SelectedDeployments: []string{"dev"}})
		if err != nil {
			t.Fatal(err)
		}
		code, raw := e.API(t, "", http.MethodGet, "/api/v2/stack-configurations/"+cfg.ID, "")
		var doc struct {
			Data struct {
				Attributes struct {
					Selected []string `json:"selected-deployments"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &doc); err != nil || code != http.StatusOK || strings.Join(doc.Data.Attributes.Selected, ",") != "dev" {
			t.Errorf("the configuration reads %d %s, want selected-deployments [dev]", code, raw)
		}
		dev := waitRun(t, c, groupRun(t, c, cfg.ID, "auto").ID, is("succeeded", "failed"))
		if dev.Status != "succeeded" {
			t.Fatalf("dev ended %s; diagnostics: %s", dev.Status, diagnostics(t, c, cfg.ID))
		}
		for _, g := range []string{"canary", "prod_default"} {
			grp, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, g)
			if err != nil {
				t.Fatal(err)
			}
			runs, err := c.StackDeploymentRuns.List(ctx, grp.ID, nil)
			if err != nil || len(runs.Items) != 0 || grp.Status != "pending" {
				t.Errorf("group %s (not selected) is %s with runs %+v, %v; want pending with none", g, grp.Status, runs, err)
			}
		}

		// staging runs when its group is rerun.
		canary, err := c.StackDeploymentGroups.ReadByName(ctx, cfg.ID, "canary")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, canary.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"staging"}}); err != nil {
			t.Fatal(err)
		}
		staging := waitRun(t, c, groupRun(t, c, cfg.ID, "canary").ID, is("succeeded", "failed"))
		if staging.Status != "succeeded" {
			t.Fatalf("staging ended %s; diagnostics: %s", staging.Status, diagnostics(t, c, cfg.ID))
		}
		if got := stepSummary(steps(t, c, staging.ID)); got != "plan=completed apply=completed plan=completed" {
			t.Errorf("staging's steps = %s", got)
		}
		deps, err := c.StackDeployments.List(ctx, st.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		latest := map[string]string{}
		for _, d := range deps.Items {
			if d.LatestDeploymentRun != nil {
				latest[d.Name] = d.LatestDeploymentRun.ID
			}
		}
		if len(deps.Items) != 3 || latest["dev"] != dev.ID || latest["staging"] != staging.ID || latest["prod"] != "" {
			t.Errorf("deployments' latest runs = %v (of %d deployments); want dev %s, staging %s, prod none", latest, len(deps.Items), dev.ID, staging.ID)
		}

		// A rerun of a deployment the selection left out runs in the mode
		// the configuration gives it: here destroy = true.
		dir := copyDir(t, "testdata/e2e")
		rewrite(t, filepath.Join(dir, "deployments.tfdeploy.hcl"), "  deployment_group = deployment_group.canary\n", "  deployment_group = deployment_group.canary\n  destroy = true\n")
		v2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, &tfe.CreateStackConfigurationOptions{SelectedDeployments: []string{"dev"}})
		if err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, c, groupRun(t, c, v2.ID, "auto").ID, is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("dev's second run ended %s; diagnostics: %s", r.Status, diagnostics(t, c, v2.ID))
		}
		canary, err = c.StackDeploymentGroups.ReadByName(ctx, v2.ID, "canary")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.StackDeploymentGroups.Rerun(ctx, canary.ID, &tfe.StackDeploymentGroupRerunOptions{Deployments: []string{"staging"}}); err != nil {
			t.Fatal(err)
		}
		destroy := waitRun(t, c, groupRun(t, c, v2.ID, "canary").ID, is("pre-deploying-pending-operator", "succeeded", "failed"))
		code, raw = e.API(t, "", http.MethodGet, "/api/v2/stack-deployment-runs/"+destroy.ID, "")
		if code != http.StatusOK || !strings.Contains(string(raw), `"plan-mode":"destroy"`) {
			t.Fatalf("staging's rerun reads %d %s, want plan-mode destroy", code, raw)
		}
		if destroy.Status != "pre-deploying-pending-operator" {
			t.Fatalf("staging's destroy is %s, want it waiting (its group's check refuses destroying); diagnostics: %s", destroy.Status, diagnostics(t, c, v2.ID))
		}
		if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, destroy.ID); err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, c, destroy.ID, is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("staging's destroy ended %s; diagnostics: %s", r.Status, diagnostics(t, c, v2.ID))
		}
		if ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-staging"); err != nil || ws.ResourceCount != 0 {
			t.Errorf("staging's workspace after its destroy = %+v, %v", ws, err)
		}
	})
}
