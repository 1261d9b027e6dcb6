package stack_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
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

// setEngine sets a stack's terraform-version (a Terrace attribute go-tfe
// does not send) and checks that it reads back.
func setEngine(t *testing.T, e *testenv.Env, stackID, version string) {
	t.Helper()
	body := `{"data":{"type":"stacks","attributes":{"terraform-version":"` + version + `"}}}`
	code, raw := e.API(t, "", http.MethodPatch, "/api/v2/stacks/"+stackID, body)
	var out struct {
		Data struct {
			Attributes struct {
				TerraformVersion string `json:"terraform-version"`
			} `json:"attributes"`
		} `json:"data"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || code != http.StatusOK || out.Data.Attributes.TerraformVersion != version {
		t.Fatalf("setting terraform-version %s: status %d, %s, %v", version, code, raw, err)
	}
}

// planLogHeader returns the first line of the plan log of a workspace's
// oldest run, which names the engine that ran it.
func planLogHeader(t *testing.T, c *tfe.Client, org, ws string) string {
	t.Helper()
	ctx := context.Background()
	runs := workspaceRuns(t, c, org, ws)
	if len(runs) == 0 {
		t.Fatalf("workspace %s has no runs", ws)
	}
	r, err := c.Runs.ReadWithOptions(ctx, runs[len(runs)-1].ID, &tfe.RunReadOptions{Include: []tfe.RunIncludeOpt{tfe.RunPlan}})
	if err != nil || r.Plan == nil {
		t.Fatalf("reading run %s: %v", runs[len(runs)-1].ID, err)
	}
	rd, err := c.Plans.Logs(ctx, r.Plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rd)
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return line
}

// TestDeploymentRuns is the end-to-end path of a stack with two components
// (app reads network's output) and three deployments, through go-tfe and
// every engine (terraform on PATH, and the engines of testenv.Engines:
// terraform 1.5.7, OpenTofu 1.12.6) on both stores: dev's and staging's
// groups auto-approve plans that destroy nothing, so dev and staging plan,
// apply and converge (an empty re-plan) by themselves; prod waits for an operator, is
// approved with Advance and then converges the same way. The stack's
// terraform-version picks the engine; the runs' logs show which ran.
func TestDeploymentRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	everyEngineSideBySide(t, deploymentScenario)
}

// everyEngineSideBySide runs scenario for every engine, one after another,
// on each store; the stores side by side, each on a server (and runner) of
// its own: a scenario spends most of its minute waiting on runs.
func everyEngineSideBySide(t *testing.T, scenario func(*testing.T, *testenv.Env, testenv.Engine)) {
	engines := testenv.Engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			e := testenv.New(t, testenv.Options{Store: st})
			for _, eng := range engines {
				t.Run(eng.Label(), func(t *testing.T) { scenario(t, e, eng) })
			}
		})
	}
}

func deploymentScenario(t *testing.T, e *testenv.Env, eng testenv.Engine) {
	ctx := context.Background()
	c := e.Client
	org, _, st := newStack(t, e, "deploy-"+strings.ReplaceAll(eng.Label(), ".", "-"), "web", eng.Version)
	cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/e2e", nil)
	if err != nil {
		t.Fatal(err)
	}
	prod := groupRun(t, c, cfg.ID, "prod_default")

	// dev and staging (whose group auto-approves plans that destroy
	// nothing) converge by themselves.
	for _, g := range []string{"auto", "canary"} {
		r := waitRun(t, c, groupRun(t, c, cfg.ID, g).ID, is("succeeded", "failed"))
		if r.Status != "succeeded" {
			t.Fatalf("group %s's run ended %s; diagnostics: %s", g, r.Status, diagnostics(t, c, cfg.ID))
		}
		if got := stepSummary(steps(t, c, r.ID)); got != "plan=completed apply=completed plan=completed" {
			t.Errorf("group %s's steps = %s", g, got)
		}
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
	out = outputs(t, c, org.Name, "stack-"+st.ID+"-staging")
	if b, _ := json.Marshal(out["app_ids"]); string(b) != `["staging-net/app-0"]` {
		t.Errorf("staging outputs = %s", b)
	}
	// Stack states: one current state per deployment.
	states, err := c.StackStates.List(ctx, st.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range states.Items {
		got = append(got, s.Deployment+":"+strconv.Itoa(s.ResourceInstanceCount))
	}
	if strings.Join(got, " ") != "dev:2 prod:3 staging:2" {
		t.Errorf("stack states = %s", got)
	}
	if len(states.Items) == 3 {
		one, err := c.StackStates.Read(ctx, states.Items[1].ID)
		if err != nil || one.Deployment != "prod" || !one.IsCurrent {
			t.Errorf("stack state = %+v, %v", one, err)
		}
		rc, err := c.StackStates.Description(ctx, states.Items[1].ID)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || !strings.Contains(string(desc), "terraform_data") {
			t.Errorf("stack state description = %.200s, %v", desc, err)
		}
	}
	// Approving again is refused: nothing waits.
	if err := c.StackDeploymentSteps.Advance(ctx, ss[0].ID); err == nil {
		t.Error("a completed step was advanced")
	}
	// The engine the stack names ran every deployment.
	want := map[string]string{"terraform": "Terraform", "tofu": "OpenTofu"}[eng.Name] + " v" + eng.Version
	for _, d := range []string{"dev", "staging", "prod"} {
		if h := planLogHeader(t, c, org.Name, "stack-"+st.ID+"-"+d); !strings.Contains(h, want) {
			t.Errorf("%s's plan log starts %q, want %q", d, h, want)
		}
	}
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

// copyDir copies a fixture so a test can change it between uploads.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func rewrite(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), old, new, 1)
	if s == string(b) {
		t.Fatalf("%q not found in %s", old, path)
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func deploymentRuns(t *testing.T, c *tfe.Client, e *testenv.Env, stackID, name string) []string {
	t.Helper()
	var out struct {
		Data []struct {
			ID         string `json:"id"`
			Attributes struct {
				Status string `json:"status"`
			} `json:"attributes"`
		} `json:"data"`
	}
	apiGet(t, e, "/api/v2/stacks/"+stackID+"/stack-deployments/"+name+"/stack-deployment-runs", &out)
	var ids []string
	for _, d := range out.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

// apiGet reads a JSON:API document go-tfe does not decode in full.
func apiGet(t *testing.T, e *testenv.Env, path string, out any) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.URL+path, nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: status %d, %v", path, resp.StatusCode, err)
	}
}

// runConfiguration returns the id of the configuration a deployment run
// runs (a relationship go-tfe's StackDeploymentRun does not decode).
func runConfiguration(t *testing.T, e *testenv.Env, runID string) string {
	t.Helper()
	var out struct {
		Data struct {
			Relationships struct {
				Configuration struct {
					Data struct {
						ID string `json:"id"`
					} `json:"data"`
				} `json:"stack-configuration"`
			} `json:"relationships"`
		} `json:"data"`
	}
	apiGet(t, e, "/api/v2/stack-deployment-runs/"+runID, &out)
	return out.Data.Relationships.Configuration.Data.ID
}

// TestDeploymentRunLifecycle covers what happens across configurations:
// approving a newer plan abandons the older pending one (prod); destroy =
// true destroys a deployment (staging); removing a deployment block
// destroys it with its last configuration (dev); a deployment that never
// converges fails with a diagnostic.
func TestDeploymentRunLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	everyEngineSideBySide(t, lifecycleScenario)
}

func lifecycleScenario(t *testing.T, e *testenv.Env, eng testenv.Engine) {
	ctx := context.Background()
	c := e.Client
	org, prj, st := newStack(t, e, "lifecycle-"+strings.ReplaceAll(eng.Label(), ".", "-"), "web", eng.Version)
	dir := copyDir(t, "testdata/e2e")
	v1, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	prod1 := waitRun(t, c, groupRun(t, c, v1.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed"))
	for _, g := range []string{"auto", "canary"} {
		if r := waitRun(t, c, groupRun(t, c, v1.ID, g).ID, is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("group %s v1 = %s: %s", g, r.Status, diagnostics(t, c, v1.ID))
		}
	}

	// A second version while prod's first plan waits.
	rewrite(t, filepath.Join(dir, "deployments.tfdeploy.hcl"), "replicas = 2", "replicas = 3")
	v2, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	prod2 := waitRun(t, c, groupRun(t, c, v2.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed"))
	for _, g := range []string{"auto", "canary"} {
		if r := waitRun(t, c, groupRun(t, c, v2.ID, g).ID, is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("group %s v2 = %s: %s", g, r.Status, diagnostics(t, c, v2.ID))
		}
	}
	if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, prod2.ID); err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, c, prod1.ID, is("abandoned", "succeeded", "failed")); r.Status != "abandoned" {
		t.Errorf("prod's first run = %s, want abandoned", r.Status)
	}
	if r := waitRun(t, c, prod2.ID, is("succeeded", "failed")); r.Status != "succeeded" {
		t.Fatalf("prod v2 = %s: %s", r.Status, diagnostics(t, c, v2.ID))
	}
	prodRuns := deploymentRuns(t, c, e, st.ID, "prod")
	if len(prodRuns) != 2 || prodRuns[0] != prod2.ID || prodRuns[1] != prod1.ID {
		t.Errorf("prod lists runs %v, want %s then %s (newest first)", prodRuns, prod2.ID, prod1.ID)
	}
	// The store selects the page and counts them all; the deployment
	// names its newest run.
	var page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Meta struct {
			Pagination struct {
				Total int `json:"total-count"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	apiGet(t, e, "/api/v2/stacks/"+st.ID+"/stack-deployments/prod/stack-deployment-runs?page%5Bnumber%5D=2&page%5Bsize%5D=1", &page)
	if len(page.Data) != 1 || page.Data[0].ID != prod1.ID || page.Meta.Pagination.Total != 2 {
		t.Errorf("page 2 of 1 of prod's runs: %+v, want %s of 2", page, prod1.ID)
	}
	var deployments struct {
		Data []struct {
			Attributes struct {
				Name string `json:"name"`
			} `json:"attributes"`
			Relationships struct {
				Latest struct {
					Data struct {
						ID string `json:"id"`
					} `json:"data"`
				} `json:"latest-deployment-run"`
			} `json:"relationships"`
		} `json:"data"`
	}
	apiGet(t, e, "/api/v2/stacks/"+st.ID+"/stack-deployments", &deployments)
	latest := map[string]string{}
	for _, d := range deployments.Data {
		latest[d.Attributes.Name] = d.Relationships.Latest.Data.ID
	}
	if latest["prod"] != prod2.ID {
		t.Errorf("prod's latest-deployment-run is %q, want %s (deployments: %v)", latest["prod"], prod2.ID, latest)
	}
	if b, _ := json.Marshal(outputs(t, c, org.Name, "stack-"+st.ID+"-prod")["app_ids"]); string(b) != `["prod-net/app-0","prod-net/app-1","prod-net/app-2"]` {
		t.Errorf("prod outputs = %s", b)
	}

	// destroy = true on staging, and dev's block removed: dev is
	// destroyed with its last configuration (v2's).
	rewrite(t, filepath.Join(dir, "deployments.tfdeploy.hcl"), "  deployment_group = deployment_group.canary\n", "  deployment_group = deployment_group.canary\n  destroy = true\n")
	b, _ := os.ReadFile(filepath.Join(dir, "deployments.tfdeploy.hcl"))
	s := string(b)
	s = s[:strings.Index(s, `deployment "dev"`)] + s[strings.Index(s, `deployment "staging"`):]
	if err := os.WriteFile(filepath.Join(dir, "deployments.tfdeploy.hcl"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	v3, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Destroying removes resources: the no_destroy check sends staging
	// and dev to an operator. Both are approved before either is waited
	// for, so the two destroys run side by side.
	destroys := map[string]string{}
	for _, name := range []string{"staging", "dev"} {
		ids := deploymentRuns(t, c, e, st.ID, name)
		if len(ids) == 0 {
			t.Fatalf("no runs for %s", name)
		}
		r := waitRun(t, c, ids[0], is("pre-deploying-pending-operator", "failed", "succeeded"))
		if r.Status != "pre-deploying-pending-operator" {
			t.Fatalf("%s destroy run = %s: %s", name, r.Status, diagnostics(t, c, v3.ID))
		}
		if got := runConfiguration(t, e, r.ID); got != map[string]string{"staging": v3.ID, "dev": v2.ID}[name] {
			t.Errorf("%s destroy run has configuration %s (v2 %s, v3 %s)", name, got, v2.ID, v3.ID)
		}
		if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		destroys[name] = r.ID
	}
	for _, name := range []string{"staging", "dev"} {
		if r := waitRun(t, c, destroys[name], is("succeeded", "failed")); r.Status != "succeeded" {
			t.Fatalf("%s destroy run = %s: %s", name, r.Status, diagnostics(t, c, v3.ID))
		}
		ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-"+name)
		if err != nil {
			t.Fatal(err)
		}
		if ws.ResourceCount != 0 {
			t.Errorf("%s still has %d resources", name, ws.ResourceCount)
		}
	}
	// prod, unchanged in v3, keeps its resources: its plan is empty.
	if r := waitRun(t, c, groupRun(t, c, v3.ID, "prod_default").ID, is("succeeded", "failed")); r.Status != "succeeded" {
		t.Errorf("prod v3 = %s: %s", r.Status, diagnostics(t, c, v3.ID))
	}
	if ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-prod"); err != nil || ws.ResourceCount != 4 {
		t.Errorf("prod's workspace after v3 = %+v, %v", ws, err)
	}
	// Deleting the stack (with force: prod still has resources) deletes
	// the workspaces of its destroyed deployments, and keeps prod's, with
	// its state and resources.
	if err := c.Stacks.ForceDelete(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	for name, kept := range map[string]bool{"prod": true, "staging": false, "dev": false} {
		ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-"+name)
		if kept && (err != nil || ws.ResourceCount != 4) {
			t.Errorf("%s's workspace, which manages resources, after the stack's deletion: %v", name, err)
		}
		if !kept && !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Errorf("%s's workspace, which manages no resources, is left after the stack's deletion (%v)", name, err)
		}
	}

	// A deployment that never converges fails with a diagnostic.
	st2, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "clock", Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st2.ID, "testdata/diverge", nil)
	if err != nil {
		t.Fatal(err)
	}
	r := waitRun(t, c, groupRun(t, c, cfg.ID, "auto").ID, is("succeeded", "failed"))
	if r.Status != "failed" || !strings.Contains(diagnostics(t, c, cfg.ID), "did not converge") {
		t.Errorf("diverging run = %s: %s", r.Status, diagnostics(t, c, cfg.ID))
	}
	if got := stepSummary(steps(t, c, r.ID)); strings.Count(got, "apply=completed") != 4 || !strings.HasSuffix(got, "plan=failed") {
		t.Errorf("diverging steps = %s", got)
	}
}
