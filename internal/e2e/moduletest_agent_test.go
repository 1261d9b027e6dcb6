package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/jobapi"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestModuleTestsRunOnAgents: a module whose test-config runs its tests
// on an agent pool has its test runs run by that pool's agents only. With
// no agent a test run waits queued (the server's executor, idle, leaves
// it); a `terrace agent` then runs it with the module's test variables
// and a token that installs a private registry module over the server's
// TLS, and reports the verdict. An agent of another pool cannot touch
// the run; a force cancel stops the run on the agent; the pool is not
// deleted while the module runs its tests there; and a run whose agent
// dies errors once its lease runs out.
func TestModuleTestsRunOnAgents(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	// terraform wants a dot in a registry source's hostname: the server
	// names itself by its IP (its certificate covers 127.0.0.1).
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := startProc(t, t.TempDir(), "", addr, "--hostname", addr, "--job-heartbeat-timeout", "3s")
	ctx := mustCtx()
	c := p.Client
	pool, tok := acmeAgentPool(ctx, t, c)

	helper := tfe.RegistryModuleID{Organization: "acme", Name: "helper", Provider: "null", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String(helper.Name), Provider: tfe.String(helper.Provider)}); err != nil {
		t.Fatal(err)
	}
	v, err := c.RegistryModules.CreateVersion(ctx, helper, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.2.0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(packModule(t, moduleCode("1.2.0")))); err != nil {
		t.Fatal(err)
	}

	id := testenv.EnableModuleTests(ctx, t, c, "acme", "greeter", "null")
	agentMode := tfe.AgentExecutionModeAgent
	if _, err := c.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{
		TestsEnabled: tfe.Bool(true), AgentExecutionMode: &agentMode, AgentPoolID: tfe.String(pool.ID)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.TestVariables.Create(ctx, id, tfe.VariableCreateOptions{Key: tfe.String("TF_VAR_name"), Value: tfe.String("agent-side"),
		Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	uses := fmt.Sprintf(`
variable "name" { type = string }
module "helper" {
  source  = "%s/acme/helper/null"
  version = "~> 1.2"
  name    = var.name
}
output "label" { value = module.helper.label }
`, addr)
	tr := testenv.StartTestRun(ctx, t, c, id, map[string]string{"main.tf": uses, "tests/label.tftest.hcl": `
run "label" {
  assert {
    condition     = output.label == "agent-side-1.2.0"
    error_message = "the label is not made of the test variable and the private module"
  }
}
`})
	time.Sleep(2 * time.Second) // the server's idle executor would have taken it by now
	if r, err := c.TestRuns.Read(ctx, id, tr.ID); err != nil || r.Status != tfe.TestRunQueued {
		t.Fatalf("with no agent the test run is %+v (%v), want queued", r, err)
	}

	ag := startAgent(t, p, tok.Token, "tests-agent")
	done := testenv.WaitTestRun(ctx, t, c, id, tr.ID)
	logs, err := c.TestRuns.Logs(ctx, id, tr.ID)
	log := readAll(t, logs, err)
	if done.Status != tfe.TestRunFinished || done.TestStatus != tfe.TestPass || done.TestsPassed != 1 {
		t.Fatalf("the test run on the agent: %s, %s, %d passed (want finished, pass, 1)\n%s", done.Status, done.TestStatus, done.TestsPassed, log)
	}
	if !strings.Contains(log, `"test_summary"`) {
		t.Fatalf("the test run's log is not terraform test's:\n%s", log)
	}
	if b, err := os.ReadFile(ag.Log); err != nil || !bytes.Contains(b, []byte(tr.ID)) {
		t.Fatalf("the agent's log does not name the test run it ran (%v):\n%s", err, b)
	}

	// A slow test run, held by the agent: an agent of another pool
	// cannot touch it; a force cancel stops it there.
	slow := testenv.StartTestRun(ctx, t, c, id, map[string]string{
		"main.tf":               "resource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 120\"\n  }\n}\n",
		"tests/slow.tftest.hcl": "run \"waits\" {}\n",
	})
	testenv.WaitTestRun(ctx, t, c, id, slow.ID, tfe.TestRunRunning)
	other, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	otherTok, err := c.AgentTokens.Create(ctx, other.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	agentCall := func(token, runner, method, path, body string) (int, string) {
		req, err := http.NewRequest(method, p.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set(jobapi.RunnerHeader, runner)
		resp, err := p.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := agentCall(otherTok.Token, "", "POST", "/api/agent/register", `{"name":"intruder"}`)
	var reg jobapi.RegisterResponse
	if code != 201 || json.Unmarshal([]byte(body), &reg) != nil {
		t.Fatalf("registering an agent of the other pool: %d %s", code, body)
	}
	base := "/api/agent/tests/" + slow.ID
	for _, call := range []struct{ method, path, body string }{
		{"GET", base + "/configuration", ""},
		{"POST", base + "/logs", "forged line\n"},
		{"POST", base + "/finish", `{"status":"finished","test_status":"pass","counts":{"passed":1}}`},
	} {
		if code, body := agentCall(otherTok.Token, reg.ID, call.method, call.path, call.body); code != 404 {
			t.Fatalf("%s %s by an agent of another pool: %d %s, want 404", call.method, call.path, code, body)
		}
	}
	if code, body := agentCall(otherTok.Token, reg.ID, "POST", base+"/heartbeat", `{}`); code != 200 || !strings.Contains(body, `"held":false`) {
		t.Fatalf("a heartbeat by an agent of another pool: %d %s, want the run not held", code, body)
	}
	if code, body := agentCall(p.Token, reg.ID, "POST", base+"/finish", `{"status":"finished","test_status":"pass"}`); code != 403 && code != 401 {
		t.Fatalf("finishing a test run with a user token: %d %s, want it refused", code, body)
	}
	if r, err := c.TestRuns.Read(ctx, id, slow.ID); err != nil || r.Status != tfe.TestRunRunning {
		t.Fatalf("the slow test run after the other pool's calls: %+v (%v), want it still running", r, err)
	}
	if err := c.AgentPools.Delete(ctx, pool.ID); err == nil || !strings.Contains(err.Error(), "registry module") {
		t.Fatalf("deleting the pool the module's tests run on: %v, want a refusal naming the module", err)
	}
	if err := c.TestRuns.ForceCancel(ctx, id, slow.ID); err != nil {
		t.Fatal(err)
	}
	if last := testenv.WaitTestRun(ctx, t, c, id, slow.ID); last.Status != tfe.TestRunCanceled {
		t.Fatalf("the force-canceled test run on the agent: %+v", last)
	}
	logs, err = c.TestRuns.Logs(ctx, id, slow.ID)
	if log := readAll(t, logs, err); strings.Contains(log, "forged line") {
		t.Fatalf("another pool's agent wrote to the test run's log:\n%s", log)
	}
	// The agent is free again: the next test run runs.
	again := testenv.StartTestRun(ctx, t, c, id, map[string]string{"main.tf": uses, "tests/label.tftest.hcl": "run \"plans\" {\n  command = plan\n}\n"})
	if r := testenv.WaitTestRun(ctx, t, c, id, again.ID); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestPass {
		t.Fatalf("a test run after the canceled one: %+v", r)
	}

	// The agent dies while it runs one: once the lease (the job
	// heartbeat timeout) runs out, the server ends the run as errored,
	// saying the pool's agent stopped.
	lost := testenv.StartTestRun(ctx, t, c, id, map[string]string{
		"main.tf":               "resource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 30\"\n  }\n}\n",
		"tests/slow.tftest.hcl": "run \"waits\" {}\n",
	})
	testenv.WaitTestRun(ctx, t, c, id, lost.ID, tfe.TestRunRunning)
	_ = ag.Cmd.Process.Kill()
	_, _ = ag.Cmd.Process.Wait()
	if r := testenv.WaitTestRun(ctx, t, c, id, lost.ID); r.Status != tfe.TestRunErrored {
		t.Fatalf("the test run of an agent that died: %+v, want errored", r)
	}
	logs, err = c.TestRuns.Logs(ctx, id, lost.ID)
	if log := readAll(t, logs, err); !strings.Contains(log, "agent executing this test run (of agent pool "+pool.ID+") stopped") {
		t.Fatalf("the log of the test run of an agent that died does not say so:\n%s", log)
	}
}
