package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunsInstallPrivateModules: terraform init inside a workspace's run
// and inside a module's test run installs a module of the organization's
// private registry (over the server's TLS, with the token the run is
// given), and a test run's token is gone once the run ends. Both stores.
func TestRunsInstallPrivateModules(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			// terraform wants a dot in a registry source's hostname: the
			// server names itself by its IP (its certificate covers
			// 127.0.0.1), so the credentials it gives runs match the
			// sources.
			e := testenv.New(t, testenv.Options{Store: st, Configure: func(c *server.Config) {
				_, port, _ := net.SplitHostPort(c.Addr)
				c.Hostname = "127.0.0.1:" + port
			}})
			testRunsInstallPrivateModules(t, e)
		})
	}
}

func testRunsInstallPrivateModules(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, e.Client, org)
	helper := tfe.RegistryModuleID{Organization: org, Name: "helper", Provider: "null", Namespace: org, RegistryName: tfe.PrivateRegistry}
	if _, err := e.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String(helper.Name), Provider: tfe.String(helper.Provider)}); err != nil {
		t.Fatal(err)
	}
	v, err := e.Client.RegistryModules.CreateVersion(ctx, helper, tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.2.0")})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.RegistryModules.UploadTarGzip(ctx, v.Links["upload"].(string), bytes.NewReader(packModule(t, moduleCode("1.2.0")))); err != nil {
		t.Fatal(err)
	}
	uses := fmt.Sprintf(`
variable "name" {
  type    = string
  default = "world"
}
module "helper" {
  source  = "%s/%s/helper/null"
  version = "~> 1.2"
  name    = var.name
}
output "label" { value = module.helper.label }
`, e.Host, org)

	// A workspace's run: its run token reads the registry.
	ws, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("consumer")})
	if err != nil {
		t.Fatal(err)
	}
	cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, uses)
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunApplied)
	outs, err := e.Client.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil || len(outs.Items) != 1 || outs.Items[0].Value != "world-1.2.0" {
		t.Fatalf("the run's outputs: %+v, %v (want label = world-1.2.0, from the private module)", outs, err)
	}

	// A module's test run: its own token reads the registry.
	tested := tfe.RegistryModuleID{Organization: org, Name: "greeter", Provider: "null", Namespace: org, RegistryName: tfe.PrivateRegistry}
	testenv.EnableModuleTests(ctx, t, e.Client, org, tested.Name, tested.Provider)
	tr := testenv.StartTestRun(ctx, t, e.Client, tested, map[string]string{"main.tf": uses, "tests/label.tftest.hcl": `
run "label" {
  assert {
    condition     = output.label == "world-1.2.0"
    error_message = "the label is not the private module's"
  }
}
`})
	done := testenv.WaitTestRun(ctx, t, e.Client, tested, tr.ID)
	if done.Status != tfe.TestRunFinished || done.TestStatus != tfe.TestPass || done.TestsPassed != 1 {
		logs, _ := e.Client.TestRuns.Logs(ctx, tested, tr.ID)
		var body []byte
		if logs != nil {
			body, _ = io.ReadAll(logs)
		}
		t.Fatalf("test run of a module using a private module: %s, %s, %d passed (want finished, pass, 1)\n%s", done.Status, done.TestStatus, done.TestsPassed, body)
	}
	// A test that shows terraform's CLI configuration (the failed
	// assertion prints the value): the token in it is masked in the log.
	shown := testenv.StartTestRun(ctx, t, e.Client, tested, map[string]string{
		"main.tf": `output "rc" { value = file("${path.module}/../terraform.rc") }` + "\n",
		"tests/rc.tftest.hcl": `
run "rc" {
  command = plan
  assert {
    condition     = output.rc == ""
    error_message = "the CLI configuration is not empty"
  }
}
`})
	if r := testenv.WaitTestRun(ctx, t, e.Client, tested, shown.ID); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestFail {
		t.Fatalf("the test showing the CLI configuration: %s, %s (want finished, fail)", r.Status, r.TestStatus)
	}
	logs, err := e.Client.TestRuns.Logs(ctx, tested, shown.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(logs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte("credentials")) || !bytes.Contains(body, []byte(e.Host)) || bytes.Contains(body, []byte(".atlasv1.")) || !bytes.Contains(body, []byte("***")) {
		t.Fatalf("the log of a test showing the CLI configuration (the credentials shown, the token masked):\n%s", body)
	}

	var n int
	if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM tokens WHERE kind = ?`, string(auth.KindTestRun)).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d test run tokens left after the test run ended (%v), want none", n, err)
	}

	// What a test run's token reaches (a module's tests are code of the
	// module's authors, and can read terraform's configuration): a
	// token of that kind for a running test run reads the registry and
	// nothing else, and nothing once the run has ended.
	slow := startSlowTestRun(ctx, t, e, tested)
	_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindTestRun, Subject: slow.ID})
	if err != nil {
		t.Fatal(err)
	}
	status := func(path string) int {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	versions := "/api/registry/v1/modules/" + org + "/helper/null/versions"
	for path, want := range map[string]int{
		versions:                       http.StatusOK,
		"/api/v2/organizations/" + org: http.StatusForbidden,
		"/api/v2/workspaces/" + ws.ID:  http.StatusForbidden,
		"/api/v2/workspaces/" + ws.ID + "/current-state-version": http.StatusForbidden,
		"/api/v2/organizations/" + org + "/registry-modules":     http.StatusForbidden,
	} {
		if got := status(path); got != want {
			t.Errorf("GET %s with a running test run's token: %d, want %d", path, got, want)
		}
	}
	if err := e.Client.TestRuns.ForceCancel(ctx, tested, slow.ID); err != nil {
		t.Fatal(err)
	}
	testenv.WaitTestRun(ctx, t, e.Client, tested, slow.ID)
	if got := status(versions); got != http.StatusUnauthorized {
		t.Errorf("GET %s with an ended test run's token: %d, want 401", versions, got)
	}
	// Deleted at the run's end; and one that outlived it is refused too.
	if _, secret, err = e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindTestRun, Subject: slow.ID}); err != nil {
		t.Fatal(err)
	}
	if got := status(versions); got != http.StatusUnauthorized {
		t.Errorf("GET %s with a token of an ended test run, made after it ended: %d, want 401", versions, got)
	}
}
