package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

const sroConfig = `
variable "fail" {
  type    = bool
  default = false
}
resource "terraform_data" "app" { input = "hello" }
resource "terraform_data" "boom" {
  count = var.fail ? 1 : 0
  provisioner "local-exec" {
    command = "sleep 4; exit 3"
  }
}
`

// TestRemoteStructuredRunOutput: terraform's cloud backend shows a
// remote plan once, with structured run output on (it renders the plan
// from its redacted JSON and skips the plan's change lines in the JSON
// log) and off (it prints the text log as it is); an apply's error
// reaches the CLI either way. For every engine; the store plays no part.
func TestRemoteStructuredRunOutput(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, eng := range engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{Store: testenv.Stores[0]})
			c := newEngineCLI(t, e, eng)
			testenv.NewOrg(t, e.Client, "acme")
			for _, sro := range []bool{true, false} {
				t.Run(fmt.Sprintf("sro=%v", sro), func(t *testing.T) {
					testStructuredRunOutput(t, e, c, sro)
				})
			}
			t.Run("remote-backend", func(t *testing.T) { testRemoteBackendTextLog(t, e, c) })
			for _, sro := range []bool{true, false} {
				t.Run(fmt.Sprintf("sensitive/sro=%v", sro), func(t *testing.T) { testSensitiveShown(t, e, c, sro) })
			}
		})
	}
}

func testStructuredRunOutput(t *testing.T, e *testenv.Env, c *cli, sro bool) {
	ctx := context.Background()
	name := fmt.Sprintf("sro-%v", sro)
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, "acme", name) + sroConfig})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Update(ctx, "acme", name, tfe.WorkspaceUpdateOptions{StructuredRunOutputEnabled: tfe.Bool(sro)})
	if err != nil || ws.StructuredRunOutputEnabled != sro {
		t.Fatalf("setting structured-run-output-enabled to %v: %v", sro, err)
	}
	once := func(what, out, summary string) {
		t.Helper()
		if n := strings.Count(out, summary); n != 1 {
			t.Fatalf("%s shows %q %d times, want once:\n%s", what, summary, n, out)
		}
	}

	out := c.run(dir, "plan")
	once("plan", out, "Plan: 1 to add, 0 to change, 0 to destroy.")
	once("plan", out, "terraform_data.app will be created")
	checkEngine(t, c, ws, out) // the runner's header lines show

	out = c.run(dir, "apply", "-auto-approve")
	once("apply -auto-approve", out, "Plan: 1 to add, 0 to change, 0 to destroy.")
	once("apply -auto-approve", out, "Apply complete! Resources: 1 added, 0 changed, 0 destroyed.")

	// An apply that fails: terraform's error reaches the CLI.
	stdout, stderr, err := c.try(dir, "apply", "-auto-approve", "-var", "fail=true")
	all := stdout + "\n" + stderr
	if err == nil || !strings.Contains(all, "exit status 3") {
		t.Fatalf("failing apply: %v; want the provisioner's error (exit status 3) in the CLI's output:\n%s", err, all)
	}
	once("failing apply", all, "Plan: 1 to add, 0 to change, 0 to destroy.")

	// The logs are terraform's JSON log lines with structured run
	// output, its text without.
	runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) == 0 {
		t.Fatalf("runs: %v", err)
	}
	for _, log := range phaseLogs(ctx, t, e, runs.Items[0]) {
		if json := strings.Contains(log, `{"@level":`); json != sro {
			t.Fatalf("with structured run output %v the log has JSON lines: %v\n%s", sro, json, log)
		}
	}
}

// testRemoteBackendTextLog: the older remote backend prints a run's log
// as it is, so its runs log text even where the workspace has structured
// run output.
func testRemoteBackendTextLog(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	dir := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`terraform {
  backend "remote" {
    hostname     = %q
    organization = "acme"
    workspaces { name = "sro-remote" }
  }
}
`, e.Host) + sroConfig})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Update(ctx, "acme", "sro-remote", tfe.WorkspaceUpdateOptions{StructuredRunOutputEnabled: tfe.Bool(true)})
	if err != nil || !ws.StructuredRunOutputEnabled {
		t.Fatalf("setting structured-run-output-enabled: %v", err)
	}
	for _, args := range [][]string{{"plan"}, {"apply", "-auto-approve"}} {
		out := c.run(dir, args...)
		if n := strings.Count(out, "Plan: 1 to add, 0 to change, 0 to destroy."); n != 1 || strings.Contains(out, `"@level"`) {
			t.Fatalf("%s with backend \"remote\" shows the plan's summary %d times (want once), as text:\n%s", args[0], n, out)
		}
	}
}

const sensitiveConfig = `
variable "secret" {
  type      = string
  sensitive = true
  default   = "Sro-Secret-Value-91"
}
resource "terraform_data" "sec" { input = var.secret }
output "sec" {
  value     = var.secret
  sensitive = true
}
`

// testSensitiveShown: the plan the CLI shows lists a sensitive output
// and a sensitive attribute as "(sensitive value)", with structured run
// output (rendered from the redacted plan, which keeps a stand-in for
// the value) as without; the value itself shows nowhere.
func testSensitiveShown(t *testing.T, e *testenv.Env, c *cli, sro bool) {
	ctx := context.Background()
	name := fmt.Sprintf("sro-sensitive-%v", sro)
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, "acme", name) + sensitiveConfig})
	c.run(dir, "init")
	if _, err := e.Client.Workspaces.Update(ctx, "acme", name, tfe.WorkspaceUpdateOptions{StructuredRunOutputEnabled: tfe.Bool(sro)}); err != nil {
		t.Fatal(err)
	}
	out := c.run(dir, "plan")
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s*\+ input\s+= \(sensitive value\)$`),
		regexp.MustCompile(`(?m)^\s*\+ sec\s+= \(sensitive value\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the plan lacks a line like %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "Sro-Secret-Value-91") {
		t.Fatalf("the plan shows the sensitive value:\n%s", out)
	}
}
