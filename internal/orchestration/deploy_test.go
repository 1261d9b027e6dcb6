package orchestration_test

import (
	"context"
	"net/http"
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
	status        string
	final, ok     bool
	runs, uploads int
}

func (f *fakeCore) Create(ctx context.Context, org, name string) (string, error) {
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
	f.status, f.final, f.ok = "planning", false, false
	return "run-fake", nil
}

func (f fakeRuns) Status(ctx context.Context, id string) (string, bool, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status, f.final, f.ok, nil
}

func (f *fakeCore) set(status string, final, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.final, f.ok = status, final, ok
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
