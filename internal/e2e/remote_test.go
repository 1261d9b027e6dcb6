package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// tryInput runs the CLI with stdin (for prompts) and returns combined output.
func (c *cli) tryInput(dir, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	var env []string
	for _, e := range c.env {
		if !strings.HasPrefix(e, "TF_INPUT=") && !strings.HasPrefix(e, "TF_IN_AUTOMATION=") {
			env = append(env, e)
		}
	}
	cmd.Env = env
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return plain(out.String()), err
}

const remoteConfig = `
variable "name" { type = string }
variable "secret" {
  type      = string
  sensitive = true
}
variable "fail" {
  type    = bool
  default = false
}
variable "sleep" {
  type    = number
  default = 0
}
resource "terraform_data" "app" {
  input = "hello ${var.name}"
  lifecycle {
    precondition {
      condition     = !var.fail
      error_message = "the plan was asked to fail"
    }
  }
}
resource "terraform_data" "slow" {
  count = var.sleep > 0 ? 1 : 0
  provisioner "local-exec" {
    command = "sleep ${var.sleep}"
  }
}
resource "terraform_data" "secret" {
  input = sha256(var.secret)
}
output "greeting" { value = terraform_data.app.output }
`

func TestTerraformRemoteExecution(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, eng := range engines(t) {
		for _, st := range testenv.Stores {
			t.Run(eng.Label()+"/"+st, func(t *testing.T) {
				t.Parallel() // see parallel in TestMain
				e := testenv.New(t, testenv.Options{Store: st})
				c := newEngineCLI(t, e, eng)
				testRemoteExecution(t, e, c)
				testLegacyRemoteExecution(t, e, c)
			})
		}
	}
}

func testRemoteExecution(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const org, secret = "acme", "s3cr3t-Pa55w0rd-xyz"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, "app") + remoteConfig})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org, "app")
	if err != nil {
		t.Fatal(err)
	}
	if ws.ExecutionMode != "remote" {
		t.Fatalf("a new workspace runs %q, want remote", ws.ExecutionMode)
	}
	for _, v := range []tfe.VariableCreateOptions{
		{Key: tfe.String("name"), Value: tfe.String("world"), Category: tfe.Category(tfe.CategoryTerraform)},
		{Key: tfe.String("secret"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryTerraform), Sensitive: tfe.Bool(true)},
	} {
		if _, err := e.Client.Variables.Create(ctx, ws.ID, v); err != nil {
			t.Fatal(err)
		}
	}
	var logs []string
	check := func(out string) {
		logs = append(logs, out)
		if strings.Contains(out, secret) {
			t.Fatalf("a sensitive value reached the output:\n%s", out)
		}
	}

	// A speculative plan streams its log and changes nothing.
	out := c.run(dir, "plan")
	check(out)
	if !strings.Contains(out, "terraform_data.app will be created") || !strings.Contains(out, "hello world") {
		t.Fatalf("plan output lacks the planned resource:\n%s", out)
	}
	if _, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID); err == nil {
		t.Fatal("a speculative plan created state")
	}
	// The run executed with the engine and version the workspace names
	// (the CLI's own, set by init): its log starts with the engine's header.
	checkEngine(t, c, ws, out)

	// apply -auto-approve applies on the server.
	out = c.run(dir, "apply", "-auto-approve")
	check(out)
	if !strings.Contains(out, "Apply complete! Resources: 2 added") {
		t.Fatalf("apply output:\n%s", out)
	}
	sv, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatalf("no state after a remote apply: %v", err)
	}
	runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) == 0 || runs.Items[0].Status != tfe.RunApplied {
		t.Fatalf("latest run: %+v %v", runs, err)
	}
	// Made by the CLI's cloud backend, which shows the plan (its redacted
	// JSON) before the apply's log: its plan JSON is made beside the apply.
	if sr, err := e.Server.Runs.System(ctx, runs.Items[0].ID); err != nil || !sr.FromCLI {
		t.Fatalf("the CLI's run is not marked as made by the CLI (%v)", err)
	}

	// apply answered "no" is discarded; answered "yes" applies.
	out, err = c.tryInput(dir, "no\n", "apply", "-var", "name=mars")
	check(out)
	if err == nil || !strings.Contains(out, "discarded") && !strings.Contains(out, "Apply cancelled") {
		t.Fatalf("apply answered no: %v\n%s", err, out)
	}
	runs, _ = e.Client.Runs.List(ctx, ws.ID, nil)
	if runs.Items[0].Status != tfe.RunDiscarded {
		t.Fatalf("run after answering no is %s, want discarded", runs.Items[0].Status)
	}
	out, err = c.tryInput(dir, "yes\n", "apply", "-var", "name=venus")
	check(out)
	if err != nil || !strings.Contains(out, "Apply complete!") {
		t.Fatalf("apply answered yes: %v\n%s", err, out)
	}
	if cur, _ := e.Client.StateVersions.ReadCurrent(ctx, ws.ID); cur == nil || cur.ID == sv.ID {
		t.Fatal("apply answered yes stored no new state")
	}

	// A plan that fails: the run errors and the error is in the log.
	if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("fail"), Value: tfe.String("true"), Category: tfe.Category(tfe.CategoryTerraform), HCL: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	out, err = c.tryInput(dir, "", "plan")
	check(out)
	if err == nil || !strings.Contains(out, "the plan was asked to fail") {
		t.Fatalf("failing plan: %v\n%s", err, out)
	}
	runs, _ = e.Client.Runs.List(ctx, ws.ID, nil)
	if runs.Items[0].Status != tfe.RunErrored {
		t.Fatalf("failing plan's run is %s", runs.Items[0].Status)
	}
	vars, _ := e.Client.Variables.List(ctx, ws.ID, nil)
	for _, v := range vars.Items {
		if v.Key == "fail" {
			_ = e.Client.Variables.Delete(ctx, ws.ID, v.ID)
		}
	}

	// Two applies on one workspace: the second waits, then runs.
	var wg sync.WaitGroup
	outs := make([]string, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _, errs[i] = c.try(dir, "apply", "-auto-approve", "-var", fmt.Sprintf("name=n%d", i))
		}()
		time.Sleep(300 * time.Millisecond)
	}
	wg.Wait()
	for i := range 2 {
		check(outs[i])
		if errs[i] != nil {
			t.Fatalf("concurrent apply %d failed: %v\n%s", i, errs[i], outs[i])
		}
	}
	runs, _ = e.Client.Runs.List(ctx, ws.ID, nil)
	if runs.Items[0].Status != tfe.RunApplied || runs.Items[1].Status != tfe.RunApplied {
		t.Fatalf("the two concurrent runs ended %s and %s", runs.Items[0].Status, runs.Items[1].Status)
	}

	// Ctrl-C during apply: the run is canceled, the workspace unlocked,
	// and the state is whatever terraform saved.
	cmd := exec.Command(c.bin, "apply", "-auto-approve", "-var", "sleep=60", "-var", "name=slow")
	cmd.Dir, cmd.Env = dir, c.env
	slow := &testenv.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = slow, slow
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor := time.Now().Add(90 * time.Second)
	for !strings.Contains(slow.String(), "Provisioning with 'local-exec'") {
		if time.Now().After(waitFor) {
			_ = cmd.Process.Kill()
			stored := ""
			if rs, err := e.Client.Runs.List(ctx, ws.ID, nil); err == nil && len(rs.Items) > 0 {
				stored = strings.Join(phaseLogs(ctx, t, e, rs.Items[0]), "\n---\n")
			}
			t.Fatalf("the slow apply never reached its provisioner:\n%s\nstored logs of the run:\n%s", slow.String(), stored)
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("terraform did not stop after Ctrl-C:\n%s", slow.String())
	}
	check(slow.String())
	var last *tfe.Run
	for waitFor = time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		runs, err = e.Client.Runs.List(ctx, ws.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if last = runs.Items[0]; last.Status == tfe.RunCanceled || last.Status == tfe.RunErrored || time.Now().After(waitFor) {
			break
		}
	}
	if last.Status != tfe.RunCanceled {
		t.Fatalf("run after Ctrl-C is %s, want canceled\n%s", last.Status, slow.String())
	}
	w, _ := e.Client.Workspaces.ReadByID(ctx, ws.ID)
	if w.Locked {
		t.Fatal("workspace still locked after a canceled apply")
	}
	// State stays readable and terraform can go on from it.
	out = c.run(dir, "apply", "-auto-approve")
	check(out)

	// destroy
	out = c.run(dir, "destroy", "-auto-approve")
	check(out)
	if !strings.Contains(out, "destroyed") {
		t.Fatalf("destroy output:\n%s", out)
	}
	list := c.run(dir, "state", "list")
	if strings.TrimSpace(list) != "" {
		t.Fatalf("resources left after destroy:\n%s", list)
	}

	// The sensitive value never appears in any stored log either.
	runs, _ = e.Client.Runs.List(ctx, ws.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	for _, r := range runs.Items {
		for _, log := range phaseLogs(ctx, t, e, r) {
			if strings.Contains(log, secret) {
				t.Fatalf("run %s log holds the sensitive value", r.ID)
			}
		}
	}
}

// checkEngine fails unless the workspace names the CLI's engine version
// and the remote run's log (out) shows that engine ran it.
func checkEngine(t *testing.T, c *cli, ws *tfe.Workspace, out string) {
	t.Helper()
	if c.eng.Name == "" {
		return
	}
	if ws.TerraformVersion != c.eng.Version {
		t.Fatalf("%s init made workspace %s with terraform-version %q, want %q", c.eng.Label(), ws.Name, ws.TerraformVersion, c.eng.Version)
	}
	header := map[string]string{"terraform": "Terraform", "tofu": "OpenTofu"}[c.eng.Name] + " v" + c.eng.Version
	if !strings.Contains(out, header) {
		t.Fatalf("the remote run of workspace %s did not run %s (its log lacks %q):\n%s", ws.Name, c.eng.Label(), header, out)
	}
}

// testLegacyRemoteExecution: older pipelines use `backend "remote"`; plan
// and apply execute on the server, with the engine the workspace names.
func testLegacyRemoteExecution(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Read(ctx, org); err != nil {
		testenv.NewOrg(t, e.Client, org)
	}
	dir := writeConfig(t, map[string]string{"main.tf": fmt.Sprintf(`terraform {
  backend "remote" {
    hostname     = %q
    organization = %q
    workspaces { name = "legacy-remote" }
  }
}
variable "who" {
  type    = string
  default = "nobody"
}
resource "terraform_data" "legacy" { input = "remote ${var.who}" }
output "legacy" { value = terraform_data.legacy.output }
`, e.Host, org)})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org, "legacy-remote")
	if err != nil {
		t.Fatalf("init with backend \"remote\" made no workspace: %v", err)
	}
	if ws.ExecutionMode != "remote" {
		t.Fatalf("workspace legacy-remote runs %q, want remote", ws.ExecutionMode)
	}
	if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("who"), Value: tfe.String("server"), Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
		t.Fatal(err)
	}
	out := c.run(dir, "plan")
	if !strings.Contains(out, "terraform_data.legacy will be created") || !strings.Contains(out, "remote server") {
		t.Fatalf("backend \"remote\" plan did not run remotely with the workspace's variable:\n%s", out)
	}
	checkEngine(t, c, ws, out)
	if _, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID); err == nil {
		t.Fatal("a remote speculative plan created state")
	}
	out = c.run(dir, "apply", "-auto-approve")
	if !strings.Contains(out, "Apply complete! Resources: 1 added") {
		t.Fatalf("backend \"remote\" apply:\n%s", out)
	}
	runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) != 2 || runs.Items[0].Status != tfe.RunApplied || !runs.Items[1].PlanOnly {
		t.Fatalf("runs of legacy-remote: %+v %v; want a speculative plan, then an applied run", runs, err)
	}
	outs, err := e.Client.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs.Items) != 1 || outs.Items[0].Name != "legacy" || outs.Items[0].Value != "remote server" {
		t.Fatalf("state after the remote apply has outputs %+v, want legacy = \"remote server\"", outs.Items)
	}
}

// phaseLogs returns the plan and apply logs of a run.
func phaseLogs(ctx context.Context, t *testing.T, e *testenv.Env, r *tfe.Run) []string {
	var out []string
	if p, err := e.Client.Plans.Read(ctx, r.Plan.ID); err == nil {
		if rd, err := e.Client.Plans.Logs(ctx, p.ID); err == nil {
			var b bytes.Buffer
			_, _ = b.ReadFrom(rd)
			out = append(out, b.String())
		}
	}
	if r.Apply != nil {
		if a, err := e.Client.Applies.Read(ctx, r.Apply.ID); err == nil && a.Status != "pending" && a.Status != "unreachable" && a.Status != "canceled" {
			if rd, err := e.Client.Applies.Logs(ctx, a.ID); err == nil {
				var b bytes.Buffer
				_, _ = b.ReadFrom(rd)
				out = append(out, b.String())
			}
		}
	}
	return out
}
