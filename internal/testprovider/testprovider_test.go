package testprovider_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/testprovider"
)

// terraformBinary returns the terraform executable, failing (not skipping)
// when it is missing: these tests are the proof that runs work offline.
func terraformBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs terraform (skipped with -short)")
	}
	if p := os.Getenv("TERRACE_TERRAFORM"); p != "" {
		return p
	}
	p, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatalf("terraform is not on PATH (or set TERRACE_TERRAFORM): %v; these tests need a terraform binary (1.11.4 is what CI uses)", err)
	}
	return p
}

// forEachEngine runs f with every engine the end-to-end tests cover: the
// terraform on PATH, terraform 1.5.7 and OpenTofu (`make engines`; a
// missing one fails under CI, see testenv.Engines).
func forEachEngine(t *testing.T, f func(t *testing.T, eng testenv.Engine)) {
	terraformBinary(t) // skips with -short
	for _, eng := range testenv.Engines(t) {
		t.Run(eng.Label(), func(t *testing.T) { f(t, eng) })
	}
}

// netWatch is an HTTP(S) proxy that refuses everything and records what was
// asked for. Pointing HTTPS_PROXY/HTTP_PROXY at it turns any network access
// by terraform (registry discovery, downloads) into a recorded failure, so
// "did not use the network" is something a test can check, not assume.
type netWatch struct {
	addr string
	mu   sync.Mutex
	reqs []string
}

func newNetWatch(t *testing.T) *netWatch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	w := &netWatch{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n')
			w.mu.Lock()
			w.reqs = append(w.reqs, strings.TrimSpace(line))
			w.mu.Unlock()
			c.Write([]byte("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
			c.Close()
		}
	}()
	return w
}

func (w *netWatch) requests() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.reqs...)
}

// workspace is a working directory plus the environment terraform runs with.
type workspace struct {
	t   *testing.T
	bin string
	dir string
	env []string
	net *netWatch
}

// newWorkspace writes files into a fresh directory and a CLI config holding
// cliConfig, and routes all network access through a netWatch.
func newWorkspace(t *testing.T, bin, cliConfig string, files map[string]string) *workspace {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rc := filepath.Join(t.TempDir(), "terraform.rc")
	if err := os.WriteFile(rc, []byte(cliConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	w := newNetWatch(t)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "TF_CLI_CONFIG_FILE", "HTTPS_PROXY", "HTTP_PROXY", "NO_PROXY", "TF_PLUGIN_CACHE_DIR", "TF_DATA_DIR", "TF_LOG":
			continue
		}
		env = append(env, kv)
	}
	proxy := "http://" + w.addr
	env = append(env,
		"TF_CLI_CONFIG_FILE="+rc,
		"HTTPS_PROXY="+proxy, "HTTP_PROXY="+proxy, "https_proxy="+proxy, "http_proxy="+proxy,
		"CHECKPOINT_DISABLE=1", // no version check: it would be network access unrelated to providers
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
	)
	return &workspace{t: t, bin: bin, dir: dir, env: env, net: w}
}

// run runs the binary and returns its combined output and exit code; any
// exit code other than those in ok fails the test.
func (w *workspace) run(ok []int, args ...string) (string, int) {
	w.t.Helper()
	cmd := exec.Command(w.bin, args...)
	cmd.Dir = w.dir
	cmd.Env = w.env
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		w.t.Fatalf("%s %s: %v", filepath.Base(w.bin), strings.Join(args, " "), err)
	}
	for _, c := range ok {
		if c == code {
			return string(out), code
		}
	}
	w.t.Fatalf("%s %s: exit %d\n%s", filepath.Base(w.bin), strings.Join(args, " "), code, out)
	return "", code
}

func (w *workspace) must(args ...string) string {
	w.t.Helper()
	out, _ := w.run([]int{0}, args...)
	return out
}

func (w *workspace) noNetwork() {
	w.t.Helper()
	if reqs := w.net.requests(); len(reqs) > 0 {
		w.t.Fatalf("terraform tried the network: %q", reqs)
	}
}

const lifecycleConfig = `
terraform {
  required_providers {
    null = {
      source  = "hashicorp/null"
      version = "~> 3.2"
    }
  }
}

variable "trigger" {
  type = string
}

resource "null_resource" "triggered" {
  triggers = {
    value = var.trigger
  }
}

# The shape go-tfe's run fixtures upload.
resource "null_resource" "foo" {}

data "null_data_source" "echo" {
  inputs = { greeting = "hello" }
}

output "id" {
  value = null_resource.triggered.id
}

output "echo" {
  value = data.null_data_source.echo.outputs.greeting
}
`

// lifecycle runs init, apply, a trigger change (which must plan a
// replacement of that resource only), apply, an idempotent plan and destroy.
func lifecycle(t *testing.T, bin string) {
	ws := newWorkspace(t, bin, testprovider.Install(t), map[string]string{"main.tf": lifecycleConfig})

	out := ws.must("init", "-no-color")
	if !strings.Contains(out, "hashicorp/null v"+testprovider.Version) {
		t.Fatalf("init did not install hashicorp/null %s:\n%s", testprovider.Version, out)
	}
	lock, err := os.ReadFile(filepath.Join(ws.dir, ".terraform.lock.hcl"))
	if err != nil || !strings.Contains(string(lock), `version     = "`+testprovider.Version+`"`) {
		t.Fatalf("lock file does not pin %s (%v):\n%s", testprovider.Version, err, lock)
	}

	ws.must("apply", "-no-color", "-auto-approve", "-var", "trigger=one")
	id1 := strings.TrimSpace(ws.must("output", "-raw", "id"))
	if id1 == "" || strings.Trim(id1, "0123456789") != "" {
		t.Fatalf("id = %q, want a decimal number", id1)
	}
	if echo := strings.TrimSpace(ws.must("output", "-raw", "echo")); echo != "hello" {
		t.Fatalf("null_data_source outputs.greeting = %q, want hello", echo)
	}

	// Changing a trigger replaces exactly that resource.
	out = ws.must("plan", "-no-color", "-var", "trigger=two", "-out", "tfplan")
	if !strings.Contains(out, "null_resource.triggered must be replaced") || !strings.Contains(out, "# forces replacement") {
		t.Fatalf("plan does not show the replacement:\n%s", out)
	}
	if !strings.Contains(out, "1 to add, 0 to change, 1 to destroy") {
		t.Fatalf("plan summary is not one replacement:\n%s", out)
	}
	var plan struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions      []string `json:"actions"`
				ReplacePaths [][]any  `json:"replace_paths"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if err := json.Unmarshal([]byte(ws.must("show", "-json", "tfplan")), &plan); err != nil {
		t.Fatal(err)
	}
	actions := map[string]string{}
	for _, rc := range plan.ResourceChanges {
		actions[rc.Address] = strings.Join(rc.Change.Actions, ",")
		if rc.Address == "null_resource.triggered" && (len(rc.Change.ReplacePaths) != 1 || rc.Change.ReplacePaths[0][0] != "triggers") {
			t.Errorf("replace_paths = %v, want [[triggers]]", rc.Change.ReplacePaths)
		}
	}
	if actions["null_resource.triggered"] != "delete,create" || actions["null_resource.foo"] != "no-op" {
		t.Fatalf("planned actions = %v, want triggered replaced and foo untouched", actions)
	}

	ws.must("apply", "-no-color", "tfplan")
	id2 := strings.TrimSpace(ws.must("output", "-raw", "id"))
	if id2 == "" || id2 == id1 {
		t.Fatalf("id after replacement = %q, before = %q: want a new id", id2, id1)
	}

	// Nothing drifts: Read keeps the state as it is.
	if out, code := ws.run([]int{0, 2}, "plan", "-no-color", "-detailed-exitcode", "-var", "trigger=two"); code != 0 {
		t.Fatalf("plan after apply is not empty:\n%s", out)
	}

	ws.must("destroy", "-no-color", "-auto-approve", "-var", "trigger=two")
	if list := strings.TrimSpace(ws.must("state", "list")); list != "" {
		t.Fatalf("state after destroy still lists:\n%s", list)
	}
	ws.noNetwork()
}

func TestLifecycle(t *testing.T) {
	forEachEngine(t, func(t *testing.T, eng testenv.Engine) { lifecycle(t, eng.Path) })
}

// TestNoNetwork checks that init with the mirror (for a configuration
// without required_providers, exactly like go-tfe's fixture) and `providers
// lock -fs-mirror` never try the network, and that the watch would notice if
// they did.
func TestNoNetwork(t *testing.T) {
	bin := terraformBinary(t)
	mirror := t.TempDir()
	cliConfig, err := testprovider.WriteMirror(mirror, testprovider.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fixture := map[string]string{"main.tf": `resource "null_resource" "foo" {}` + "\n"}

	t.Run("init", func(t *testing.T) {
		ws := newWorkspace(t, bin, cliConfig, fixture)
		ws.must("init", "-no-color")
		ws.noNetwork()
	})

	t.Run("providers lock", func(t *testing.T) {
		ws := newWorkspace(t, bin, cliConfig, fixture)
		platform := runtime.GOOS + "_" + runtime.GOARCH
		ws.must("providers", "lock", "-no-color", "-fs-mirror="+mirror, "-platform="+platform)
		ws.noNetwork()
		lock, err := os.ReadFile(filepath.Join(ws.dir, ".terraform.lock.hcl"))
		if err != nil || !strings.Contains(string(lock), `"h1:`) {
			t.Fatalf("lock file has no h1: hash (%v):\n%s", err, lock)
		}
		// The locked hash matches what init installs from the mirror.
		ws.must("init", "-no-color")
		ws.noNetwork()
	})

	// Control: a provider that is not mirrored goes to the registry, and
	// the watch sees it. Without this, an inert watch would pass the above.
	t.Run("control", func(t *testing.T) {
		ws := newWorkspace(t, bin, cliConfig, map[string]string{"main.tf": `resource "random_id" "x" { byte_length = 4 }` + "\n"})
		ws.run([]int{1}, "init", "-no-color")
		reqs := ws.net.requests()
		if len(reqs) == 0 || !strings.Contains(strings.Join(reqs, "\n"), "registry.terraform.io") {
			t.Fatalf("init of an unmirrored provider did not reach the watch: %q", reqs)
		}
	})
}

// TestStateFromRealProvider checks that a state written by the real
// hashicorp/null provider (attributes id and triggers, schema version 0) is
// read without changes, so existing workspaces keep their resources.
func TestStateFromRealProvider(t *testing.T) {
	bin := terraformBinary(t)
	state := `{
  "version": 4,
  "terraform_version": "1.2.0",
  "serial": 3,
  "lineage": "5f0e6a2c-6c1f-4a53-9c3a-0d1c8e9b9a10",
  "outputs": {},
  "resources": [
    {
      "mode": "managed",
      "type": "null_resource",
      "name": "test",
      "provider": "provider[\"registry.terraform.io/hashicorp/null\"]",
      "instances": [
        {
          "schema_version": 0,
          "attributes": {"id": "4263891374290101092", "triggers": {"hello": "wat3"}},
          "sensitive_attributes": []
        }
      ]
    }
  ]
}`
	ws := newWorkspace(t, bin, testprovider.Install(t), map[string]string{
		"main.tf":           `resource "null_resource" "test" { triggers = { hello = "wat3" } }` + "\n",
		"terraform.tfstate": state,
	})
	ws.must("init", "-no-color")
	if out, code := ws.run([]int{0, 2}, "plan", "-no-color", "-detailed-exitcode"); code != 0 {
		t.Fatalf("plan against the real provider's state is not empty:\n%s", out)
	}
	if out := ws.must("state", "show", "-no-color", "null_resource.test"); !strings.Contains(out, "4263891374290101092") {
		t.Fatalf("state lost the id:\n%s", out)
	}
	ws.noNetwork()
}

// TestTimeSleepAndTerraformTest runs a configuration shaped like go-tfe's
// test-run fixture (null_resource, a time_sleep depending on it, another
// null_resource after it) through apply, `terraform test` and destroy.
func TestTimeSleepAndTerraformTest(t *testing.T) {
	forEachEngine(t, timeSleep)
}

func timeSleep(t *testing.T, eng testenv.Engine) {
	ws := newWorkspace(t, eng.Path, testprovider.Install(t), map[string]string{
		"main.tf": `
variable "wait" {
  type    = string
  default = "1s"
}

resource "null_resource" "first" {}

resource "time_sleep" "pause" {
  depends_on       = [null_resource.first]
  create_duration  = var.wait
  destroy_duration = "0s"
}

resource "null_resource" "second" {
  depends_on = [time_sleep.pause]
}

output "slept_at" {
  value = time_sleep.pause.id
}
`,
		"main.tftest.hcl": "run \"test\" {}\n",
	})
	out := ws.must("init", "-no-color")
	if !strings.Contains(out, "hashicorp/time v"+testprovider.Time.Versions[0]) {
		t.Fatalf("init did not install hashicorp/time:\n%s", out)
	}
	start := time.Now()
	ws.must("apply", "-no-color", "-auto-approve")
	if d := time.Since(start); d < time.Second {
		t.Errorf("apply took %v; time_sleep with create_duration 1s should wait", d)
	}
	if at := strings.TrimSpace(ws.must("output", "-raw", "slept_at")); !strings.HasPrefix(at, "20") || !strings.HasSuffix(at, "Z") {
		t.Errorf("time_sleep id = %q, want an RFC 3339 UTC time", at)
	}
	// *.tftest.hcl files came with terraform 1.6 (1.5's `test` was an
	// experiment with another layout); every OpenTofu has them.
	if eng.Name == "tofu" || !strings.HasPrefix(eng.Version, "1.5.") {
		if out := ws.must("test", "-no-color", "-var", "wait=0s"); !strings.Contains(out, "1 passed, 0 failed") {
			t.Fatalf("%s test did not pass:\n%s", eng.Name, out)
		}
	}
	if out, _ := ws.run([]int{1}, "plan", "-no-color", "-var", "wait=soon"); !strings.Contains(out, "Invalid duration") {
		t.Fatalf("a bad duration is not rejected:\n%s", out)
	}
	ws.must("destroy", "-no-color", "-auto-approve")
	ws.noNetwork()
}

// TestWriteMirrorLayout checks the paths terraform and tofu look up, for
// other platforms too (so the function is not tied to the host).
func TestWriteMirrorLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the providers (skipped with -short)")
	}
	// A stand-in executable for foreign platforms: cross-compiling the
	// providers would only test the Go toolchain, and costs minutes cold.
	fake := filepath.Join(t.TempDir(), "fake-provider")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, opts := range []testprovider.Options{
		{},
		{GOOS: "darwin", GOARCH: "arm64", Providers: []testprovider.Provider{{Type: "null", Versions: []string{"3.2.4", "3.1.1"}, Binary: fake}}},
		{GOOS: "windows", GOARCH: "amd64", Providers: []testprovider.Provider{{Type: "time", Versions: []string{"0.13.1"}, Binary: fake}}},
	} {
		dir := t.TempDir()
		cfg, err := testprovider.WriteMirror(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		goos, goarch := opts.GOOS, opts.GOARCH
		if goos == "" {
			goos, goarch = runtime.GOOS, runtime.GOARCH
		}
		providers := opts.Providers
		if providers == nil {
			providers = []testprovider.Provider{testprovider.Null, testprovider.Time}
		}
		for _, host := range []string{"registry.terraform.io", "registry.opentofu.org"} {
			for _, p := range providers {
				addr := `"` + host + "/hashicorp/" + p.Type + `"`
				if !strings.Contains(cfg, addr) {
					t.Errorf("CLI config lacks %s:\n%s", addr, cfg)
				}
				for _, v := range p.Versions {
					f := filepath.Join(dir, host, "hashicorp", p.Type, v, goos+"_"+goarch, "terraform-provider-"+p.Type+"_v"+v)
					if goos == "windows" {
						f += ".exe"
					}
					fi, err := os.Stat(f)
					if err != nil {
						t.Errorf("missing %s: %v", f, err)
						continue
					}
					if fi.Mode()&0o111 == 0 || (p.Binary == "" && fi.Size() < 1<<20) {
						t.Errorf("%s: mode %v, size %d: want a built executable", f, fi.Mode(), fi.Size())
					}
				}
			}
		}
		for _, want := range []string{"provider_installation", "filesystem_mirror", `"` + dir + `"`, "direct {"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("CLI config lacks %s:\n%s", want, cfg)
			}
		}
	}
}
