package orchestration_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// fakeCore stands in for workspaces, configuration versions and runs so
// the deployment lifecycle can be driven step by step.
type fakeCore struct {
	mu            sync.Mutex
	runs, uploads int
	// results holds each run's status, by run ID: a deployment still
	// watching an older run must not see the newest run's result.
	results map[string]fakeResult
}

type fakeResult struct {
	status    string
	final, ok bool
}

func (f *fakeCore) Project(ctx context.Context, org string) (string, error) { return "prj-fake", nil }
func (f *fakeCore) CheckCreate(ctx context.Context, org, prj string) error  { return nil }
func (f *fakeCore) Create(ctx context.Context, org, prj, name string) (string, error) {
	return "ws-fake", nil
}
func (f *fakeCore) Delete(ctx context.Context, id string) error { return nil }
func (f *fakeCore) CreateFromArchive(ctx context.Context, ws string, tgz []byte, spec bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.uploads++
	return "cv-fake", nil
}

type fakeRuns struct{ *fakeCore }

func (f fakeRuns) Create(ctx context.Context, ws, cv string, planOnly, destroy bool) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runs++
	if f.results == nil {
		f.results = map[string]fakeResult{}
	}
	id := fmt.Sprintf("run-fake-%d", f.runs)
	f.results[id] = fakeResult{status: "planning"}
	return id, nil
}

func (f fakeRuns) Status(ctx context.Context, id string) (string, bool, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.results[id]
	if !ok {
		return "", false, false, fmt.Errorf("no run %s", id)
	}
	return r.status, r.final, r.ok, nil
}

func (f *fakeCore) set(status string, final, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// The newest run takes the result.
	if f.results == nil {
		f.results = map[string]fakeResult{}
	}
	f.results[fmt.Sprintf("run-fake-%d", f.runs)] = fakeResult{status: status, final: final, ok: ok}
}

// A deployment whose server stopped watching its run is settled from the
// run when it is next read, and blocks other deployments until then.
func TestDeploymentLifecycle(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
			t.Fatal(err)
		}
		f := &fakeCore{}
		svc := e.Server.Orchestration
		svc.Workspaces, svc.Configs, svc.Runs = f, f, fakeRuns{f}
		svc.PollEvery = 10 * time.Millisecond
		c := apiClient{t: t, e: e, token: e.Token}
		const o = "/orgs/acme"
		c.must(201, "POST", o+"/projects", map[string]any{"id": "shop"})
		c.must(201, "POST", o+"/env-types", map[string]any{"id": "development"})
		c.must(201, "POST", o+"/projects/shop/envs", map[string]any{"id": "dev", "env_type_id": "development"})
		c.must(201, "POST", o+"/resource-types", map[string]any{"id": "thing", "output_schema": map[string]any{"type": "object"}})
		c.must(201, "POST", o+"/modules", map[string]any{"id": "thing", "resource_type": "thing", "module_source_code": `output "x" { value = 1 }`})
		c.must(201, "POST", o+"/module-rules", map[string]any{"module_id": "thing"})
		deploy := map[string]any{"project_id": "shop", "env_id": "dev", "manifest": map[string]any{"shared": map[string]any{"a": map[string]any{"type": "thing"}}}}

		// A failed run fails the deployment; the next one diffs against nothing.
		d := c.must(http.StatusAccepted, "POST", o+"/deployments", deploy)
		waitStatus := func(id, want string) map[string]any {
			t.Helper()
			for i := 0; i < 500; i++ {
				got := c.must(200, "GET", o+"/deployments/"+id, nil)
				if got["status"] == want {
					return got
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("deployment %s never became %s", id, want)
			return nil
		}
		waitRun := func(n int) {
			t.Helper()
			for i := 0; i < 500; i++ {
				f.mu.Lock()
				runs := f.runs
				f.mu.Unlock()
				if runs == n {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("run %d never started", n)
		}
		waitRun(1)
		c.must(http.StatusConflict, "POST", o+"/deployments", deploy)
		f.set("errored", true, false)
		if got := waitStatus(d["id"].(string), "failed"); got["status_message"] == "" {
			t.Fatalf("a failed deployment without a message: %v", got)
		}

		// The server stops watching: the deployment stays executing and
		// blocks the environment until its run ends.
		d = c.must(http.StatusAccepted, "POST", o+"/deployments", deploy)
		if len(d["diff"].([]any)) != 1 {
			t.Fatalf("the diff after a failed deployment: %v", d["diff"])
		}
		waitRun(2)
		svc.Shutdown()
		if got := c.must(200, "GET", o+"/deployments/"+d["id"].(string), nil); got["status"] != "executing" {
			t.Fatalf("a deployment with a running run: %v", got)
		}
		c.must(http.StatusConflict, "POST", o+"/deployments", deploy)
		f.set("applied", true, true)
		waitStatus(d["id"].(string), "succeeded")
		dry := c.must(200, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": deploy["manifest"], "is_dry_run": true})
		if len(dry["diff"].([]any)) != 0 {
			t.Fatalf("diff after the settled deployment: %v", dry["diff"])
		}
	})
}

// The history API's rules: idempotency keys (body or header), what a
// rollback may return to, diffs and reads of past deployments, and bad
// requests answered with the field or parameter at fault.
func TestDeploymentHistoryAPI(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		for _, org := range []string{"acme"} {
			if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
				t.Fatal(err)
			}
		}
		f := &fakeCore{}
		svc := e.Server.Orchestration
		svc.Workspaces, svc.Configs, svc.Runs = f, f, fakeRuns{f}
		svc.PollEvery = 10 * time.Millisecond
		c := apiClient{t: t, e: e, token: e.Token}
		const o = "/orgs/acme"
		c.must(201, "POST", o+"/projects", map[string]any{"id": "shop"})
		c.must(201, "POST", o+"/env-types", map[string]any{"id": "development"})
		for _, env := range []string{"dev", "prod"} {
			c.must(201, "POST", o+"/projects/shop/envs", map[string]any{"id": env, "env_type_id": "development"})
		}
		c.must(201, "POST", o+"/resource-types", map[string]any{"id": "thing", "output_schema": map[string]any{"type": "object"}})
		c.must(201, "POST", o+"/modules", map[string]any{"id": "thing", "resource_type": "thing",
			"module_source_code": "variable \"n\" {\n  default = 0\n}\noutput \"x\" { value = var.n }\n"})
		c.must(201, "POST", o+"/module-rules", map[string]any{"module_id": "thing"})
		manifest := func(n int) map[string]any {
			return map[string]any{"shared": map[string]any{"a": map[string]any{"type": "thing", "params": map[string]any{"n": n}}}}
		}
		runs := 0
		// wait ends the deployment's run (the next one started) and waits
		// for the deployment to take its result.
		wait := func(id, want string) {
			t.Helper()
			runs++
			for i := 0; ; i++ {
				f.mu.Lock()
				n := f.runs
				f.mu.Unlock()
				if n == runs {
					break
				}
				if i == 500 {
					t.Fatalf("run %d never started", runs)
				}
				time.Sleep(10 * time.Millisecond)
			}
			if want == "failed" {
				f.set("errored", true, false)
			} else {
				f.set("applied", true, true)
			}
			for i := 0; i < 500; i++ {
				if got := c.must(200, "GET", o+"/deployments/"+id, nil); got["status"] == want {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			t.Fatalf("deployment %s never became %s", id, want)
		}

		// A failed deployment cannot be returned to.
		failed := c.must(http.StatusAccepted, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(0)})
		wait(failed["id"].(string), "failed")

		// Idempotency key in a header: the retry is the same deployment.
		keyed := apiClient{t: t, e: e, token: e.Token, header: map[string]string{"Idempotency-Key": "k-1"}}
		d1 := keyed.must(http.StatusAccepted, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(1)})
		wait(d1["id"].(string), "succeeded")
		if d1["created_by"] == "" || d1["created_by"] == nil {
			t.Fatalf("a deployment without its author: %v", d1)
		}
		if again := keyed.must(http.StatusAccepted, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(1)}); again["id"] != d1["id"] {
			t.Fatalf("a retried request made %v, want %v", again["id"], d1["id"])
		}
		keyed.must(http.StatusConflict, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(2)})
		keyed.must(http.StatusBadRequest, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(1), "idempotency_key": "other"})
		// The same key in another environment is another request.
		p1 := keyed.must(http.StatusAccepted, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "prod", "manifest": manifest(1)})
		wait(p1["id"].(string), "succeeded")

		d2 := c.must(http.StatusAccepted, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(2)})
		wait(d2["id"].(string), "succeeded")
		diff := c.must(200, "GET", o+"/deployments/"+d2["id"].(string)+"/diff", nil)
		if diff["from"] != d1["id"] || diff["num_changed"] != float64(1) || diff["num_added"] != float64(0) {
			t.Fatalf("diff against the previous deployment: %v", diff)
		}
		if d := c.must(200, "GET", o+"/deployments/"+d1["id"].(string)+"/diff?from="+failed["id"].(string), nil); d["num_changed"] != float64(1) {
			t.Fatalf("diff against a named deployment: %v", d)
		}
		c.must(422, "GET", o+"/deployments/"+d2["id"].(string)+"/diff?from="+p1["id"].(string), nil)
		c.must(404, "GET", o+"/deployments/"+d2["id"].(string)+"/diff?from=dep-nope", nil)
		if g := c.must(200, "GET", o+"/deployments/"+d1["id"].(string)+"/graph", nil); len(g["nodes"].([]any)) != 1 || g["mermaid"] == "" {
			t.Fatalf("graph of a past deployment: %v", g)
		}
		if tf := c.must(200, "GET", o+"/deployments/"+d1["id"].(string)+"/tf", nil); !strings.Contains(tf["main.tf"].(string), "n      = 1") && !strings.Contains(tf["main.tf"].(string), "n = 1") {
			t.Fatalf("terraform of a past deployment: %v", tf)
		}
		c.must(404, "GET", o+"/deployments/dep-nope/tf", nil)

		rollback := func(to string) map[string]any {
			return map[string]any{"project_id": "shop", "env_id": "dev", "mode": "rollback", "rollback_to_deployment_id": to}
		}
		for _, bad := range []map[string]any{rollback(failed["id"].(string)), rollback(p1["id"].(string))} {
			if out := c.must(422, "POST", o+"/deployments", bad); fields(out) != "rollback_to_deployment_id" {
				t.Fatalf("rollback to %v: %v", bad["rollback_to_deployment_id"], out)
			}
		}
		withManifest := rollback(d1["id"].(string))
		withManifest["manifest"] = manifest(3)
		if out := c.must(422, "POST", o+"/deployments", withManifest); fields(out) != "manifest" {
			t.Fatalf("rollback with a manifest: %v", out)
		}
		if out := c.must(422, "POST", o+"/deployments", map[string]any{"project_id": "shop", "env_id": "dev", "manifest": manifest(3), "rollback_to_deployment_id": d1["id"]}); fields(out) != "rollback_to_deployment_id" {
			t.Fatalf("a deploy with a rollback target: %v", out)
		}
		rb := c.must(http.StatusAccepted, "POST", o+"/deployments", rollback(d1["id"].(string)))
		if rb["mode"] != "rollback" || rb["rollback_to_deployment_id"] != d1["id"] || len(rb["diff"].([]any)) != 1 {
			t.Fatalf("rollback: %v", rb)
		}
		wait(rb["id"].(string), "succeeded")
		if d := c.must(200, "GET", o+"/deployments/"+rb["id"].(string)+"/diff?from="+d1["id"].(string), nil); d["num_changed"] != float64(0) {
			t.Fatalf("a rollback differs from its target: %v", d)
		}
		c.must(400, "GET", o+"/projects/shop/envs/dev/outputs?sensitive=maybe", nil)
	})
}
