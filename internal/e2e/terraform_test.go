package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) {
	if mode, ok := os.LookupEnv(awsHelperVar); ok {
		os.Exit(awsHelper(mode))
	}
	if mode, ok := os.LookupEnv(gcpHelperVar); ok {
		os.Exit(gcpHelper(mode))
	}
	if mode, ok := os.LookupEnv(azureHelperVar); ok {
		os.Exit(azureHelper(mode))
	}
	flag.Parse()
	parallel(4)
	storetest.Main(m)
}

// parallel lets n tests marked t.Parallel run at once, unless -parallel
// was given. The end-to-end tests spend most of their time waiting: the
// CLI polls a run with backoff, and the runner's job waits for its
// claim. Measured on 2 cores, TestRemoteWorkspaceName used 18 s of CPU
// in 67 s. Go's default (GOMAXPROCS) would run two of them on 2 cores;
// four keep the cores about as busy as one test keeps one, and the
// package's wall time is most of make test's.
func parallel(n int) {
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given && runtime.GOMAXPROCS(0) < n {
		if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
			panic(err)
		}
	}
}

// engines returns the engines every cloud-block scenario runs with: the
// terraform on PATH and those tools/engines/versions lists (terraform
// 1.5.7, OpenTofu 1.12.6; `make engines` builds them). See testenv.Engines.
func engines(t *testing.T) []testenv.Engine { return testenv.Engines(t) }

// cli runs one engine against one Terrace server.
type cli struct {
	t    *testing.T
	bin  string
	eng  testenv.Engine // zero when made by newCLI from a bare path
	env  []string
	host string
}

// newEngineCLI is newCLI for one of engines(t).
func newEngineCLI(t *testing.T, e *testenv.Env, eng testenv.Engine) *cli {
	c := newCLI(t, e, eng.Path)
	c.eng = eng
	return c
}

func newCLI(t *testing.T, e *testenv.Env, bin string) *cli {
	dir := t.TempDir()
	rc := filepath.Join(dir, "terraform.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", e.Host, e.Token)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(),
		"TF_CLI_CONFIG_FILE="+rc,
		"SSL_CERT_FILE="+e.CAFile,
		"TF_IN_AUTOMATION=1",
		"CHECKPOINT_DISABLE=1",
		"TF_INPUT=0",
		"HOME="+dir,
	)
	return &cli{t: t, bin: bin, env: env, host: e.Host}
}

// run runs the CLI in dir and returns stdout; it fails the test on error.
func (c *cli) run(dir string, args ...string) string {
	c.t.Helper()
	out, errOut, err := c.try(dir, args...)
	if err != nil {
		c.t.Fatalf("%s %s: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(c.bin), strings.Join(args, " "), err, out, errOut)
	}
	return out
}

func (c *cli) try(dir string, args ...string) (string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, args...)
	cmd.Dir = dir
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return plain(stdout.String()), plain(stderr.String()), err
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// plain drops the colours of the CLI's output: the cloud backend colours
// what it renders of a run with structured run output (the plan, JSON
// log lines) whatever TF_IN_AUTOMATION says.
func plain(s string) string { return ansi.ReplaceAllString(s, "") }

func writeConfig(t *testing.T, files map[string]string) string {
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func cloudBlock(host, org, ws string) string {
	return fmt.Sprintf(`terraform {
  cloud {
    hostname     = %q
    organization = %q
    workspaces { name = %q }
  }
}
`, host, org, ws)
}

const producer = `
variable "size" {
  type    = number
  default = 1
}
resource "terraform_data" "net" {
  count = var.size
  input = "net-${count.index}"
}
output "vpc_id" { value = "vpc-${var.size}" }
output "names" { value = terraform_data.net[*].output }
`

func TestTerraformCloudBlockLocalExecution(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, eng := range engines(t) {
		for _, st := range testenv.Stores {
			t.Run(eng.Label()+"/"+st, func(t *testing.T) {
				t.Parallel() // see parallel in TestMain
				e := testenv.New(t, testenv.Options{Store: st})
				testLocalExecution(t, e, newEngineCLI(t, e, eng))
			})
		}
	}
}

func testLocalExecution(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}

	// terraform init creates the workspace; then it runs locally with its
	// state in Terrace.
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, "network") + producer})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org, "network")
	if err != nil {
		t.Fatalf("terraform init did not create the workspace: %v", err)
	}
	if _, err := e.Client.Workspaces.UpdateByID(ctx, ws.ID, tfe.WorkspaceUpdateOptions{ExecutionMode: tfe.String("local")}); err != nil {
		t.Fatal(err)
	}

	c.run(dir, "apply", "-auto-approve")
	sv1, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatalf("no state after the first apply: %v", err)
	}
	c.run(dir, "apply", "-auto-approve", "-var", "size=3")
	sv2, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	if sv2.Serial <= sv1.Serial || sv2.ID == sv1.ID {
		t.Fatalf("second apply: serial %d -> %d (ids %s, %s); want it to grow", sv1.Serial, sv2.Serial, sv1.ID, sv2.ID)
	}

	list := c.run(dir, "state", "list")
	for i := range 3 {
		if !strings.Contains(list, fmt.Sprintf("terraform_data.net[%d]", i)) {
			t.Fatalf("state list lacks terraform_data.net[%d]:\n%s", i, list)
		}
	}
	var outs map[string]struct {
		Value any `json:"value"`
	}
	if err := json.Unmarshal([]byte(c.run(dir, "output", "-json")), &outs); err != nil {
		t.Fatal(err)
	}
	if outs["vpc_id"].Value != "vpc-3" {
		t.Fatalf("output vpc_id = %v, want vpc-3", outs["vpc_id"].Value)
	}
	// The outputs are also visible through the API.
	wsOuts, err := e.Client.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, o := range wsOuts.Items {
		if o.Name == "vpc_id" && o.Value == "vpc-3" {
			found = true
		}
	}
	if !found {
		t.Fatalf("current-state-version-outputs lacks vpc_id=vpc-3: %+v", wsOuts.Items)
	}

	// state pull returns what Terrace stores; state push of a newer serial
	// becomes the current state.
	pulled := c.run(dir, "state", "pull")
	var st map[string]any
	if err := json.Unmarshal([]byte(pulled), &st); err != nil {
		t.Fatalf("state pull is not JSON: %v", err)
	}
	if int64(st["serial"].(float64)) != sv2.Serial {
		t.Fatalf("state pull serial %v, want %d", st["serial"], sv2.Serial)
	}
	st["serial"] = float64(sv2.Serial + 5)
	pushed, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, "pushed.tfstate"), pushed, 0o644); err != nil {
		t.Fatal(err)
	}
	c.run(dir, "state", "push", "pushed.tfstate")
	// terraform's remote state manager persists the pushed state with its
	// serial, bumped once more because the stored state changed.
	sv3, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil || sv3.Serial < sv2.Serial+5 {
		t.Fatalf("after state push: %+v %v; want serial at least %d", sv3, err, sv2.Serial+5)
	}
	// A stale push is refused and changes nothing.
	st["serial"] = float64(1)
	stale, _ := json.Marshal(st)
	_ = os.WriteFile(filepath.Join(dir, "stale.tfstate"), stale, 0o644)
	if _, _, err := c.try(dir, "state", "push", "stale.tfstate"); err == nil {
		// terraform refuses locally (serial check) or the server does; either way it must fail.
		t.Fatal("pushing a stale serial succeeded")
	}
	if cur, _ := e.Client.StateVersions.ReadCurrent(ctx, ws.ID); cur == nil || cur.ID != sv3.ID {
		t.Fatal("a refused push changed the current state")
	}

	// Two applies at once: one holds the lock, the other fails on it;
	// nothing is lost.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	stderrs := make([]string, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, stderrs[i], errs[i] = c.try(dir, "apply", "-auto-approve", "-var", fmt.Sprintf("size=%d", 4+i), "-lock-timeout=0s")
		}()
	}
	wg.Wait()
	failed := 0
	for i := range 2 {
		if errs[i] != nil {
			failed++
			if !strings.Contains(stderrs[i], "lock") {
				t.Fatalf("an apply failed for another reason than the lock: %s", stderrs[i])
			}
		}
	}
	if failed > 1 {
		t.Fatalf("both concurrent applies failed:\n%s\n%s", stderrs[0], stderrs[1])
	}
	cur, err := e.Client.StateVersions.ReadCurrent(ctx, ws.ID)
	if err != nil || cur.Serial <= sv3.Serial {
		t.Fatalf("after concurrent applies: %+v %v", cur, err)
	}
	if w, _ := e.Client.Workspaces.ReadByID(ctx, ws.ID); w == nil || w.Locked {
		t.Fatal("the workspace stayed locked after the applies")
	}
	list = c.run(dir, "state", "list")
	if !strings.Contains(list, "terraform_data.net[3]") {
		t.Fatalf("state after concurrent applies lacks the fourth resource:\n%s", list)
	}

	// A second workspace reads the first one's outputs through
	// terraform_remote_state.
	consumer := fmt.Sprintf(`
data "terraform_remote_state" "net" {
  backend = "remote"
  config = {
    hostname     = %q
    organization = %q
    workspaces   = { name = "network" }
  }
}
output "vpc" { value = data.terraform_remote_state.net.outputs.vpc_id }
`, e.Host, org)
	if _, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app"), ExecutionMode: tfe.String("local")}); err != nil {
		t.Fatal(err)
	}
	cdir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org, "app") + consumer})
	c.run(cdir, "init")
	c.run(cdir, "apply", "-auto-approve")
	if got := strings.TrimSpace(c.run(cdir, "output", "-raw", "vpc")); !strings.HasPrefix(got, "vpc-") {
		t.Fatalf("remote state output = %q", got)
	}

	// The legacy remote backend works too.
	legacy := fmt.Sprintf(`terraform {
  backend "remote" {
    hostname     = %q
    organization = %q
    workspaces { name = "legacy" }
  }
}
resource "terraform_data" "x" { input = "legacy" }
output "x" { value = terraform_data.x.output }
`, e.Host, org)
	if _, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("legacy"), ExecutionMode: tfe.String("local")}); err != nil {
		t.Fatal(err)
	}
	ldir := writeConfig(t, map[string]string{"main.tf": legacy})
	c.run(ldir, "init")
	c.run(ldir, "apply", "-auto-approve")
	lws, _ := e.Client.Workspaces.Read(ctx, org, "legacy")
	if _, err := e.Client.StateVersions.ReadCurrent(ctx, lws.ID); err != nil {
		t.Fatalf("the remote backend stored no state: %v", err)
	}
	if got := strings.TrimSpace(c.run(ldir, "output", "-raw", "x")); got != "legacy" {
		t.Fatalf("legacy output = %q", got)
	}
}
