package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// testedModule is a module with tests: pass.tftest.hcl passes with the
// run's -var name=world; secret.tftest.hcl fails an assertion on the
// module's test variable TF_VAR_suffix, whose value terraform shows in
// the failure (the log must mask it).
var testedModule = map[string]string{
	"main.tf": `
variable "name" {
  type = string
}
variable "suffix" {
  type    = string
  default = "none"
}
resource "terraform_data" "greeting" {
  input = "hello-${var.name}"
}
output "greeting" { value = terraform_data.greeting.output }
`,
	"tests/pass.tftest.hcl": `
run "greets" {
  assert {
    condition     = output.greeting == "hello-world"
    error_message = "the greeting is wrong"
  }
}
`,
	"tests/secret.tftest.hcl": `
run "suffix" {
  command = plan
  assert {
    condition     = var.suffix == "expected-suffix"
    error_message = "the suffix is not the expected one"
  }
}
`,
}

const testSecret = "s3cr3t-suffix-9f2c"

// TestTerraformModuleTests: terraform test -cloud-run runs a private
// registry module's tests on Terrace (terraform uploads the module,
// creates a test run, streams its log and exits with the tests' verdict),
// with the module's sensitive test variable masked; go-tfe reads the runs
// and their logs, force-cancels a running one, and bad requests are
// refused with the reason. Both stores.
func TestTerraformModuleTests(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	eng := engines(t)[0] // terraform on PATH: -cloud-run needs terraform >= 1.7
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			e := testenv.New(t, testenv.Options{Store: st})
			testModuleTests(t, e, newEngineCLI(t, e, eng))
		})
	}
}

func testModuleTests(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const org = "acme"
	testenv.NewOrg(t, e.Client, org)
	if _, err := e.Client.RegistryModules.Create(ctx, org, tfe.RegistryModuleCreateOptions{Name: tfe.String("greeter"), Provider: tfe.String("null")}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: org, Name: "greeter", Provider: "null", Namespace: org, RegistryName: tfe.PrivateRegistry}

	// terraform wants a dot in a module source's hostname: the server by
	// its IP (its certificate covers 127.0.0.1), with credentials for it.
	host := strings.Replace(e.Host, "localhost", "127.0.0.1", 1)
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", host, e.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	c.env = append(c.env, "TF_CLI_CONFIG_FILE="+rc)
	dir := writeConfig(t, map[string]string{"main.tf": testedModule["main.tf"]})
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tests/pass.tftest.hcl", "tests/secret.tftest.hcl"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(testedModule[f]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	source := "-cloud-run=" + host + "/" + org + "/greeter/null"

	// Tests not enabled: the CLI says why.
	if out, errOut, err := c.try(dir, "test", source, "-var", "name=world"); err == nil || !strings.Contains(out+errOut, "tests are not enabled for module") {
		t.Fatalf("terraform test on a module without tests: err %v\n%s\n%s", err, out, errOut)
	}
	if _, err := e.Client.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if m, err := e.Client.RegistryModules.Read(ctx, id); err != nil || m.TestConfig == nil || !m.TestConfig.TestsEnabled {
		t.Fatalf("module after enabling tests: %+v, %v", m, err)
	}
	if _, err := e.Client.TestVariables.Create(ctx, id, tfe.VariableCreateOptions{Key: tfe.String("TF_VAR_suffix"), Value: tfe.String(testSecret),
		Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if vl, err := e.Client.TestVariables.List(ctx, id, nil); err != nil || len(vl.Items) != 1 || vl.Items[0].Value != "" || !vl.Items[0].Sensitive {
		t.Fatalf("test variables: %+v, %v (one, sensitive, its value never shown)", vl, err)
	}
	if _, err := e.Client.TestVariables.Create(ctx, id, tfe.VariableCreateOptions{Key: tfe.String("name"), Value: tfe.String("x"),
		Category: tfe.Category(tfe.CategoryTerraform)}); err == nil || !strings.Contains(err.Error(), "environment variables") {
		t.Fatalf("a terraform-category test variable: %v, want a refusal naming environment variables", err)
	}

	// Only the passing file: terraform exits 0.
	out := c.run(dir, "test", source, "-filter=tests/pass.tftest.hcl", "-var", "name=world")
	for _, want := range []string{"greets... pass", "Success! 1 passed, 0 failed."} {
		if !strings.Contains(out, want) {
			t.Fatalf("terraform test with a filter: no %q in\n%s", want, out)
		}
	}
	if strings.Contains(out, "secret.tftest.hcl") {
		t.Fatalf("the filter was not applied:\n%s", out)
	}

	// Every file: the secret one fails, and its value is masked.
	out, errOut, err := c.try(dir, "test", source, "-var", "name=world")
	all := out + errOut
	if err == nil {
		t.Fatalf("terraform test with a failing test exited 0:\n%s", all)
	}
	for _, want := range []string{"greets... pass", "suffix... fail", "the suffix is not the expected one", "Failure! 1 passed, 1 failed."} {
		if !strings.Contains(all, want) {
			t.Fatalf("terraform test: no %q in\n%s", want, all)
		}
	}
	if strings.Contains(all, testSecret) {
		t.Fatalf("the sensitive test variable's value is in the test output:\n%s", all)
	}

	runs, err := e.Client.TestRuns.List(ctx, id, nil)
	if err != nil || len(runs.Items) != 2 || runs.TotalCount != 2 {
		t.Fatalf("test runs: %+v, %v", runs, err)
	}
	newest := runs.Items[0]
	if newest.Status != tfe.TestRunFinished || newest.TestStatus != tfe.TestFail || newest.TestsPassed != 1 || newest.TestsFailed != 1 ||
		newest.StatusTimestamps.FinishedAt.IsZero() || newest.ConfigurationVersion == nil || newest.ConfigurationVersion.ID == "" {
		t.Fatalf("newest test run: %+v", newest)
	}
	if older := runs.Items[1]; older.Status != tfe.TestRunFinished || older.TestStatus != tfe.TestPass || older.TestsPassed != 1 || older.TestsFailed != 0 {
		t.Fatalf("older test run: %+v", older)
	}
	logs, err := e.Client.TestRuns.Logs(ctx, id, newest.ID)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(logs)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(body, []byte(`"type":"test_summary"`)) || !bytes.Contains(body, []byte("***")) || bytes.Contains(body, []byte(testSecret)) {
		t.Fatalf("test run log (a summary, the secret masked):\n%s", body)
	}

	testModuleTestCancel(ctx, t, e, id)
	testModuleTestInterrupt(ctx, t, e, c, id, source)
	testModuleTestLostExecutor(ctx, t, e, id)
	testModuleTestPrivileges(ctx, t, e, id)
	testModuleTestRefusals(ctx, t, e, id)

	// The module's deletion takes along its test runs, and the test
	// configurations and variables it owns elsewhere.
	mod, err := e.Client.RegistryModules.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	owned := func() (n int) {
		for _, table := range []string{"module_test_runs WHERE module_id = ?", "variables WHERE workspace_id = ?", "configuration_versions WHERE workspace_id = ?"} {
			var c int
			if err := e.Server.DB.QueryRow(ctx, "SELECT COUNT(*) FROM "+table, mod.ID).Scan(&c); err != nil {
				t.Fatal(err)
			}
			n += c
		}
		return n
	}
	if n := owned(); n < 3 {
		t.Fatalf("the module owns %d test runs, variables and configurations before its deletion, want several", n)
	}
	runIDs := map[string]bool{}
	listed, err := e.Client.TestRuns.List(ctx, id, nil)
	if err != nil || len(listed.Items) == 0 {
		t.Fatalf("test runs: %+v, %v", listed, err)
	}
	for _, r := range listed.Items {
		runIDs[r.ID] = true
	}
	if err := e.Client.RegistryModules.DeleteByName(ctx, id); err != nil {
		t.Fatal(err)
	}
	if n := owned(); n != 0 {
		t.Fatalf("%d test runs, variables or configurations of the deleted module are left", n)
	}
	// Their logs' blobs wait in the ledger of blobs to delete.
	for id := range runIDs {
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM run_garbage WHERE blob_key = ?`, "logs/"+id).Scan(&n); err != nil || n != 1 {
			t.Fatalf("the log of deleted test run %s in the ledger: %d, %v", id, n, err)
		}
	}
}

// startSlowTestRun starts a test run whose test sleeps in a provisioner,
// and waits until it runs.
func startSlowTestRun(ctx context.Context, t *testing.T, e *testenv.Env, id tfe.RegistryModuleID) *tfe.TestRun {
	t.Helper()
	tr := testenv.StartTestRun(ctx, t, e.Client, id, map[string]string{
		"main.tf": `
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 120"
  }
}
`,
		"tests/slow.tftest.hcl": "run \"waits\" {}\n",
	})
	testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID, tfe.TestRunRunning)
	return tr
}

// testModuleTestPrivileges: terraform test, and what it starts, cannot
// gain privileges unless the organization lets its runs use sudo
// (terraform-worker-sudo-enabled), as runs do (the kernel's word, from
// /proc/self/status of a local-exec provisioner).
func testModuleTestPrivileges(ctx context.Context, t *testing.T, e *testenv.Env, id tfe.RegistryModuleID) {
	if b, err := os.ReadFile("/proc/thread-self/status"); err != nil || !bytes.Contains(b, []byte("NoNewPrivs:\t0")) {
		t.Fatalf("this test needs Linux and a test process that started without no_new_privs: %v\n%s", err, b)
	}
	privs := map[string]string{
		"main.tf": `
resource "terraform_data" "privs" {
  provisioner "local-exec" {
    command = "grep -Eq 'NoNewPrivs:[[:space:]]+1' /proc/self/status"
  }
}
`,
		"tests/privs.tftest.hcl": "run \"no_privileges\" {}\n",
	}
	if r := testenv.WaitTestRun(ctx, t, e.Client, id, testenv.StartTestRun(ctx, t, e.Client, id, privs).ID); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestPass {
		t.Fatalf("a test checking it cannot gain privileges, in an organization without sudo: %+v", r)
	}
	if _, err := e.Client.Admin.Organizations.Update(ctx, id.Organization, tfe.AdminOrganizationUpdateOptions{TerraformWorkerSudoEnabled: true}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := e.Client.Admin.Organizations.Update(ctx, id.Organization, tfe.AdminOrganizationUpdateOptions{TerraformWorkerSudoEnabled: false}); err != nil {
			t.Fatal(err)
		}
	}()
	if r := testenv.WaitTestRun(ctx, t, e.Client, id, testenv.StartTestRun(ctx, t, e.Client, id, privs).ID); r.Status != tfe.TestRunFinished || r.TestStatus == tfe.TestPass {
		t.Fatalf("the same test in an organization allowing sudo: %+v, want a finished run whose test did not pass", r)
	}
}

// testModuleTestCancel: a running test run force-canceled ends canceled.
func testModuleTestCancel(ctx context.Context, t *testing.T, e *testenv.Env, id tfe.RegistryModuleID) {
	tr := startSlowTestRun(ctx, t, e, id)
	if err := e.Client.TestRuns.ForceCancel(ctx, id, tr.ID); err != nil {
		t.Fatal(err)
	}
	last := testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID)
	if last.Status != tfe.TestRunCanceled || last.StatusTimestamps.ForceCanceledAt.IsZero() {
		t.Fatalf("force-canceled test run: %+v", last)
	}
	if err := e.Client.TestRuns.Cancel(ctx, id, tr.ID); err == nil {
		t.Fatal("canceling an ended test run succeeded")
	}
}

// testModuleTestInterrupt: Ctrl-C in terraform test -cloud-run cancels
// the test run on the server (go-tfe's Cancel: terraform there is
// interrupted, lets its provisioner end and tears down), and the CLI ends
// without success once the run is canceled.
func testModuleTestInterrupt(ctx context.Context, t *testing.T, e *testenv.Env, c *cli, id tfe.RegistryModuleID, source string) {
	dir := writeConfig(t, map[string]string{"main.tf": `
resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 5"
  }
}
`})
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tests", "slow.tftest.hcl"), []byte("run \"waits\" {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before, err := e.Client.TestRuns.List(ctx, id, nil)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(c.bin, "test", source)
	cmd.Dir, cmd.Env = dir, c.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var run *tfe.TestRun
	waitFor(t, 60*time.Second, "the CLI's test run running", func() bool {
		l, err := e.Client.TestRuns.List(ctx, id, nil)
		if err != nil || l.TotalCount == before.TotalCount {
			return false
		}
		run = l.Items[0]
		return run.Status == tfe.TestRunRunning
	})
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("terraform test exited 0 after an interrupt:\n%s", out.String())
		}
	case <-time.After(90 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("terraform test did not end after an interrupt:\n%s", out.String())
	}
	if r, err := e.Client.TestRuns.Read(ctx, id, run.ID); err != nil || r.Status != tfe.TestRunCanceled || !r.StatusTimestamps.ForceCanceledAt.IsZero() {
		t.Fatalf("the interrupted CLI's test run: %+v, %v (canceled, not force-canceled)\n%s", r, err, out.String())
	}
}

// testModuleTestLostExecutor: a running test run whose lease another
// replica's executor holds, and let run out (that replica died), is ended
// as errored, saying why; this server's executor, which no longer holds
// it, stops its terraform and reports nothing.
func testModuleTestLostExecutor(ctx context.Context, t *testing.T, e *testenv.Env, id tfe.RegistryModuleID) {
	tr := startSlowTestRun(ctx, t, e, id)
	if _, err := e.Server.DB.Exec(ctx, `UPDATE module_test_runs SET runner_id = 'a-replica-that-died', lease_until = 1 WHERE id = ?`, tr.ID); err != nil {
		t.Fatal(err)
	}
	last := testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID)
	if last.Status != tfe.TestRunErrored || last.TestStatus != tfe.TestError || last.StatusTimestamps.ErroredAt.IsZero() {
		t.Fatalf("test run of a dead executor: %+v", last)
	}
	// The reaper commits the status and the log's end together: go-tfe
	// reads why the moment it sees the status.
	logs, err := e.Client.TestRuns.Logs(ctx, id, tr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if body, err := io.ReadAll(logs); err != nil || !bytes.Contains(body, []byte("stopped before it ended")) {
		t.Fatalf("the log of the test run of a dead executor, read once it errored: %q, %v (want why it ended)", body, err)
	}
}

// testModuleTestRefusals: what a test run may not be.
func testModuleTestRefusals(ctx context.Context, t *testing.T, e *testenv.Env, id tfe.RegistryModuleID) {
	m, err := e.Client.RegistryModules.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := e.Client.ConfigurationVersions.CreateForRegistryModule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	uploaded, err := e.Client.ConfigurationVersions.CreateForRegistryModule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.ConfigurationVersions.UploadTarGzip(ctx, uploaded.UploadURL, bytes.NewReader(tarball(t, map[string][]byte{"main.tf": []byte("")}))); err != nil {
		t.Fatal(err)
	}
	ws, err := e.Client.Workspaces.Create(ctx, id.Organization, tfe.WorkspaceCreateOptions{Name: tfe.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	wsCV, err := e.Client.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		opts tfe.TestRunCreateOptions
		want string
	}{
		"not uploaded":          {tfe.TestRunCreateOptions{ConfigurationVersion: pending}, "has no uploaded configuration"},
		"a workspace's version": {tfe.TestRunCreateOptions{ConfigurationVersion: wsCV}, "is not one of module"},
		"filter leaving":        {tfe.TestRunCreateOptions{ConfigurationVersion: uploaded, Filters: []string{"../etc/passwd"}}, "relative path inside the module"},
		"directory as a flag":   {tfe.TestRunCreateOptions{ConfigurationVersion: uploaded, TestDirectory: tfe.String("-chdir=/")}, "relative path inside the module"},
		"bad variable value":    {tfe.TestRunCreateOptions{ConfigurationVersion: uploaded, Variables: []*tfe.RunVariable{{Key: "name", Value: "{ broken"}}}, "not an HCL expression"},
		"bad variable key":      {tfe.TestRunCreateOptions{ConfigurationVersion: uploaded, Variables: []*tfe.RunVariable{{Key: "a b", Value: `"x"`}}}, "not a terraform identifier"},
	} {
		c.opts.RegistryModule = m
		_, err := e.Client.TestRuns.Create(ctx, c.opts)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", name, err, c.want)
		}
	}
	// A member who may read the registry but not manage it reads test
	// runs, and may neither run nor cancel them.
	reader, _ := e.UserClient(t, id.Organization, "reader@acme.test")
	if _, err := reader.TestRuns.List(ctx, id, nil); err != nil {
		t.Fatalf("a member listing test runs: %v", err)
	}
	if _, err := reader.TestRuns.Create(ctx, tfe.TestRunCreateOptions{ConfigurationVersion: uploaded, RegistryModule: m}); err == nil {
		t.Fatal("a member without manage-modules created a test run")
	}
	if _, err := reader.TestVariables.List(ctx, id, nil); err == nil {
		t.Fatal("a member without manage-modules listed test variables")
	}
	// A module's test configuration is read by those who may run its
	// tests, and by no one else.
	if cv, err := e.Client.ConfigurationVersions.Read(ctx, uploaded.ID); err != nil || cv.Status != tfe.ConfigurationUploaded || cv.Source != tfe.ConfigurationSourceAPI {
		t.Fatalf("the module's uploaded test configuration: %+v, %v", cv, err)
	}
	if _, err := reader.ConfigurationVersions.Read(ctx, uploaded.ID); err == nil {
		t.Fatal("a member without manage-modules read a module's test configuration")
	}
	if n, err := e.Client.TestRuns.List(ctx, id, nil); err != nil || n.TotalCount != 7 {
		t.Fatalf("test runs after the refusals: %+v, %v (the seven made before, no more)", n, err)
	}
}
