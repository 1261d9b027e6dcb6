package ui_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// orchAPI calls the orchestrator's API as the site admin.
func orchAPI(t *testing.T, e *testenv.Env, method, path string, body any) map[string]any {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, e.URL+"/api/terrace/v1"+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
	}
	out := map[string]any{}
	_ = json.Unmarshal(raw, &out)
	return out
}

// An orchestrator deployment's page draws its resource graph as SVG and
// the environment's page lists the deployment history.
func TestOrchestratorDeploymentGraph(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	orchAPI(t, e, "POST", "/orgs/acme/env-types", map[string]any{"id": "development"})
	orchAPI(t, e, "POST", "/orgs/acme/projects", map[string]any{"id": "shop"})
	orchAPI(t, e, "POST", "/orgs/acme/projects/shop/envs", map[string]any{"id": "dev", "env_type_id": "development"})
	orchAPI(t, e, "POST", "/orgs/acme/resource-types", map[string]any{"id": "k8s-namespace",
		"output_schema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
	orchAPI(t, e, "POST", "/orgs/acme/modules", map[string]any{"id": "ns-module", "resource_type": "k8s-namespace",
		"module_source_code": "variable \"name\" { type = string }\nresource \"terraform_data\" \"ns\" { input = var.name }\noutput \"name\" { value = terraform_data.ns.output }\n",
		"module_inputs":      map[string]any{"name": "${context.env_id}-${context.res_id}"}})
	orchAPI(t, e, "POST", "/orgs/acme/module-rules", map[string]any{"module_id": "ns-module"})
	manifest := map[string]any{
		"shared": map[string]any{"ns": map[string]any{"type": "k8s-namespace"}},
		"workloads": map[string]any{
			"api":    map[string]any{"outputs": map[string]any{"NS": "${shared.ns.outputs.name}"}},
			"worker": map[string]any{"outputs": map[string]any{"NS": "${shared.ns.outputs.name}"}},
		},
	}
	dep := orchAPI(t, e, "POST", "/orgs/acme/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest})
	id, _ := dep["id"].(string)
	if id == "" {
		if d, ok := dep["deployment"].(map[string]any); ok {
			id, _ = d["id"].(string)
		}
	}
	if id == "" {
		t.Fatalf("deploy answered %v", dep)
	}
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		d := orchAPI(t, e, "GET", "/orgs/acme/deployments/"+id, nil)
		if d["status"] == "succeeded" {
			break
		}
		if d["status"] == "failed" || time.Now().After(deadline) {
			t.Fatalf("deployment: %v", d)
		}
	}

	// A member who may not read the environment's workspace sees the
	// environment listed without its deployments, and neither its history
	// nor the deployment.
	_, m := e.UserClient(t, "acme", "member@acme.test")
	_, member, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	if st, body := e.API(t, member, "GET", "/app/acme/environments", nil); st != http.StatusOK || !strings.Contains(string(body), "shop/dev") || strings.Contains(string(body), "succeeded") {
		t.Fatalf("a member's environments: %d\n%s", st, body)
	}
	for _, p := range []string{"/app/acme/environments/shop/dev", "/app/acme/deployments/" + id} {
		if st, _ := e.API(t, member, "GET", p, nil); st != http.StatusNotFound {
			t.Fatalf("a member opens %s: %d, want 404", p, st)
		}
	}

	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/environments")
	if !strings.Contains(tb.text("#environments"), "shop/dev") || !strings.Contains(tb.text("#environments"), "succeeded") {
		t.Fatalf("environments: %q", tb.text("#environments"))
	}
	tb.screenshot("environments")
	tb.open("/app/acme/environments/shop/dev")
	if !strings.Contains(tb.text("#deployments"), id) {
		t.Fatalf("deployment history lacks %s: %q", id, tb.text("#deployments"))
	}
	tb.open("/app/acme/deployments/" + id)
	nodes := must(tb, chromedpNodes(`#graph g.node`))
	want := []string{"k8s-namespace.default#shared.ns", "workload.default#api", "workload.default#worker"}
	for _, w := range want {
		if !strings.Contains(strings.Join(nodes, " "), w) {
			t.Errorf("graph nodes %v lack %s", nodes, w)
		}
	}
	if n := must(tb, chromedpCount(`#graph path.edge`)); n != 2 {
		t.Errorf("graph has %d edges, want 2 (both workloads depend on the namespace)", n)
	}
	// Dependencies are drawn left of their dependents.
	if x := must(tb, chromedpX(`#graph g[data-node="k8s-namespace.default#shared.ns"] rect`)); x >= must(tb, chromedpX(`#graph g[data-node="workload.default#api"] rect`)) {
		t.Errorf("the namespace is not left of the workload that depends on it")
	}
	tb.screenshot("deployment-graph")
}
