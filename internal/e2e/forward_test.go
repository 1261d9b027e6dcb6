package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunTaskThroughAgent: a run task whose service lives where only the
// agents of a pool reach it (here a host name, tasks.internal.test, that
// only the agent's HTTP proxy knows) names that pool: the server hands
// the signed request to a `terrace agent` of the pool, which sends it and
// reports the answer. The task is verified that way when it is created,
// and a run's stage passes on the service's callback. The same URL
// without the pool fails verification: the server cannot reach it.
func TestRunTaskThroughAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	t.Parallel()
	const key = "forwarded-hmac-key"
	p := startProc(t, t.TempDir(), "", "")
	ctx := mustCtx()
	c := p.Client

	// The private service, reached as an HTTP proxy by the agent alone.
	var mu sync.Mutex
	var hosts []string
	got := make(chan runtask.Payload, 8)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		hosts = append(hosts, r.Host)
		mu.Unlock()
		if r.Host != "tasks.internal.test" || !notify.Verify(key, body, r.Header.Get("X-TFC-Task-Signature")) {
			http.Error(w, "not for this service", http.StatusForbidden)
			return
		}
		var pl runtask.Payload
		if err := json.Unmarshal(body, &pl); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusOK)
		if pl.AccessToken != runtask.TestToken {
			got <- pl
		}
	}))
	t.Cleanup(svc.Close)

	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := c.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("forwarder")})
	if err != nil {
		t.Fatal(err)
	}
	const url = "http://tasks.internal.test/scan"
	// Without the pool the server sends the verification itself, and
	// cannot reach the service.
	if _, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "direct", URL: url, Category: "task", HMACKey: tfe.String(key)}); err == nil ||
		!strings.Contains(err.Error(), "verification of the run task failed") {
		t.Fatalf("a task the server cannot reach was created: %v", err)
	}
	// With the pool and no agent running, nobody sends it.
	if _, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "early", URL: url, Category: "task", HMACKey: tfe.String(key),
		AgentPool: pool}); err == nil || !strings.Contains(err.Error(), "none is running") {
		t.Fatalf("a task verified with no agent running: %v", err)
	}

	testenv.StartAgentEnv(t, []string{"HTTP_PROXY=" + svc.URL, "NO_PROXY="}, p.Process, tok.Token, "forwarder")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		l, err := c.Agents.List(ctx, pool.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) == 1 && l.Items[0].Status == "idle" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent is not idle after a minute: %+v", l.Items)
		}
	}
	task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: url, Category: "task", HMACKey: tfe.String(key), AgentPool: pool})
	if err != nil {
		t.Fatal(err)
	}
	// (go-tfe reads a task without its agent pool: the document says it.)
	req, _ := http.NewRequest(http.MethodGet, p.URL+"/api/v2/tasks/"+task.ID, nil)
	req.Header.Set("Authorization", "Bearer "+p.Token)
	var doc struct {
		Data struct {
			Relationships struct {
				AgentPool struct {
					Data struct{ Type, ID string } `json:"data"`
				} `json:"agent-pool"`
			} `json:"relationships"`
		} `json:"data"`
	}
	if res, err := p.HTTP.Do(req); err != nil {
		t.Fatal(err)
	} else if err := json.NewDecoder(res.Body).Decode(&doc); err != nil || doc.Data.Relationships.AgentPool.Data.ID != pool.ID {
		t.Fatalf("the task's agent pool reads back as %+v (%v)", doc.Data.Relationships.AgentPool.Data, err)
	}
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("remote")})
	if err != nil {
		t.Fatal(err)
	}
	stages := []tfe.Stage{tfe.PrePlan}
	if _, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
		t.Fatal(err)
	}
	r := createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "x" {}`).ID, nil)
	var pl runtask.Payload
	select {
	case pl = <-got:
	case <-time.After(time.Minute):
		t.Fatal("the service got no run task request through the agent in a minute")
	}
	if pl.RunID != r.ID || pl.Stage != "pre_plan" {
		t.Fatalf("the forwarded request: run %s, stage %s", pl.RunID, pl.Stage)
	}
	// The service answers on the callback, straight to Terrace.
	cb := `{"data":{"type":"task-results","attributes":{"status":"passed","message":"clean"}}}`
	hr, _ := http.NewRequest(http.MethodPatch, pl.TaskResultCallbackURL, strings.NewReader(cb))
	hr.Header.Set("Authorization", "Bearer "+pl.AccessToken)
	hr.Header.Set("Content-Type", "application/vnd.api+json")
	res, err := p.HTTP.Do(hr)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("the callback answered %s", res.Status)
	}
	if r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the run ended %s: %s", r.Status, erroredReason(ctx, t, c, r.ID))
	}
	mu.Lock()
	defer mu.Unlock()
	for _, h := range hosts {
		if h != "tasks.internal.test" {
			t.Errorf("the service got a request for %q", h)
		}
	}
	if len(hosts) < 2 {
		t.Errorf("the service got %d requests, want the verification and the run's", len(hosts))
	}
	// A pool that forwards a task's requests is not deleted under it.
	if err := c.AgentPools.Delete(ctx, pool.ID); err == nil {
		t.Error("the pool of a run task was deleted")
	}
}
