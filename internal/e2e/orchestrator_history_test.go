package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// gitRepo is a bare git repository served over HTTP on 127.0.0.1 by git
// http-backend behind a net/http/cgi handler, plus a work tree to commit
// from.
type gitRepo struct {
	t    *testing.T
	work string
	URL  string // http://127.0.0.1:port/modules.git
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Fatalf("this test needs git on PATH (it serves a repository with git http-backend): %v", err)
	}
	// git-http-backend lives in git's exec path (/usr/lib/git-core on Debian).
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("this test serves a git repository with git-http-backend, which git does not have: %v", err)
	}
	root := t.TempDir()
	r := &gitRepo{t: t, work: filepath.Join(root, "work")}
	r.git(root, "init", "-q", "--bare", "-b", "main", "modules.git")
	r.git(root, "init", "-q", "-b", "main", "work")
	srv := httptest.NewServer(&cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"},
	})
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/modules.git"
	return r
}

func (r *gitRepo) git(dir string, args ...string) {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.test", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.test", "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// commit writes files (path → content) and pushes them to main; a tag is
// pushed too when given.
func (r *gitRepo) commit(msg, tag string, files map[string]string) {
	r.t.Helper()
	for p, content := range files {
		full := filepath.Join(r.work, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git(r.work, "add", "-A")
	r.git(r.work, "commit", "-q", "-m", msg)
	bare := filepath.Join(filepath.Dir(r.work), "modules.git")
	r.git(r.work, "push", "-q", bare, "main")
	if tag != "" {
		r.git(r.work, "tag", tag)
		r.git(r.work, "push", "-q", bare, tag)
	}
}

// The seed's namespace module, kept in a git repository's subfolder; each
// version says which it is in its output.
func gitNamespaceModule(version string) string {
	return `variable "name" { type = string }
resource "terraform_data" "ns" { input = var.name }
output "name" { value = "` + version + `:${terraform_data.ns.output}" }
output "humanitec_metadata" {
  value = { "Namespace" = terraform_data.ns.output, "Module-Version" = "` + version + `" }
}
`
}

const mountedModule = `variable "greeting" { type = string }
resource "terraform_data" "m" { input = var.greeting }
output "text" { value = "${terraform_data.m.output} from a mounted module" }
`

// dbModule has a variable with no default that module_inputs sets and a
// dependency's params override, and a sensitive output.
const dbModule = `variable "size" { type = number }
variable "tier" {
  type    = string
  default = "basic"
}
resource "terraform_data" "db" { input = "${var.tier}-${var.size}" }
output "size" { value = var.size }
output "password" {
  value     = "s3cret-${terraform_data.db.output}"
  sensitive = true
}
`

const appModuleYAML = `
resource_type: app
module_source_code: |
  variable "db_password" { type = string }
  resource "terraform_data" "app" { input = "app" }
  output "ok" { value = length(var.db_password) > 0 }
module_inputs:
  db_password: ${resources.db.outputs.password}
dependencies:
  db:
    type: db
    params:
      size: 5
`

const sourcesManifest = `
workloads:
  api:
    resources:
      ns: {type: k8s-namespace}
      pinned: {type: k8s-namespace, class: pinned}
      mounted: {type: mounted, params: {greeting: hello}}
      app: {type: app}
    outputs:
      NS: ${resources.ns.outputs.name}
      PINNED: ${resources.pinned.outputs.name}
      MOUNTED: ${resources.mounted.outputs.text}
`

// TestOrchestratorSources deploys modules from a real git repository served
// over HTTP (the seed's git::…//my-namespace-module example, and the same
// module pinned with ?ref=v1), from a mounted path, and an inline module
// whose variable set by module_inputs is overridden by a dependency's
// params; bare github.com sources are refused with the git:: form.
func TestOrchestratorSources(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			e := testenv.New(t, testenv.Options{Store: st})
			testOrchestratorSources(t, e)
		})
	}
}

func testOrchestratorSources(t *testing.T, e *testenv.Env) {
	t.Setenv("SSL_CERT_FILE", e.CAFile)
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	c := &terraceCLI{t: t, e: e, org: org, dir: t.TempDir()}
	repo := newGitRepo(t)
	repo.commit("v1", "v1", map[string]string{"my-namespace-module/main.tf": gitNamespaceModule("v1")})
	mounted := filepath.Join(t.TempDir(), "mounted-module")
	if err := os.MkdirAll(mounted, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mounted, "main.tf"), []byte(mountedModule), 0o644); err != nil {
		t.Fatal(err)
	}

	c.run("create", "environment-type", "development")
	c.run("create", "project", "my-project")
	c.run("create", "environment", "my-project", "dev", "--set", "env_type_id=development")
	for _, rt := range []string{"k8s-namespace", "mounted", "db", "app"} {
		c.run("create", "resource-type", rt, "--set-json", `output_schema={"type":"object"}`)
	}
	// A bare github.com source is refused with the git:: form to use.
	out, err := c.try("create", "module", "gh-module", "--set", "resource_type=k8s-namespace", "--set", "module_source=github.com/my-org/modules//my-namespace-module?ref=v1")
	if err == nil || !strings.Contains(err.Error(), `git::https://github.com/my-org/modules//my-namespace-module?ref=v1`) || !strings.Contains(err.Error(), "422") {
		t.Fatalf("a bare github.com source: %v\n%s", err, out)
	}
	if _, err := c.try("create", "module", "bb-module", "--set", "resource_type=k8s-namespace", "--set", "module_source=bitbucket.org/my-org/modules"); err == nil || !strings.Contains(err.Error(), "git::https://bitbucket.org/my-org/modules") {
		t.Fatalf("a bare bitbucket.org source: %v", err)
	}
	// The seed's own example, with the repository's URL.
	c.run("create", "module", "my-namespace-module", "--set", "resource_type=k8s-namespace",
		"--set", "module_source=git::"+repo.URL+"//my-namespace-module", "--set", "module_inputs.name=${context.env_id}-${context.res_id}")
	c.run("create", "module", "pinned-namespace-module", "--set", "resource_type=k8s-namespace",
		"--set", "module_source=git::"+repo.URL+"//my-namespace-module?ref=v1", "--set", "module_inputs.name=${context.res_id}")
	c.run("create", "module", "mounted-module", "--set", "resource_type=mounted", "--set", "module_source="+mounted,
		"--set", "module_inputs.greeting=unused")
	c.run("create", "module", "db-module", "--set", "resource_type=db", "--set", "module_source_code="+dbModule, "--set-json", "module_inputs={\"size\":1}")
	c.run("create", "module", "app-module", "--set-yaml=@"+c.file("app.yaml", appModuleYAML))
	c.run("create", "module-rule", "--set", "module_id=my-namespace-module")
	c.run("create", "module-rule", "--set", "module_id=pinned-namespace-module", "--set", "resource_class=pinned")
	for _, m := range []string{"mounted-module", "db-module", "app-module"} {
		c.run("create", "module-rule", "--set", "module_id="+m)
	}
	manifest := c.file("manifest.yaml", sourcesManifest)

	type result struct {
		Deployment struct{ ID, Status string }
		Outputs    struct {
			Workloads map[string]map[string]any
			Resources map[string]map[string]any
			Metadata  map[string]map[string]any
		}
	}
	deploy := func(extra ...string) result {
		t.Helper()
		var r result
		out := c.run(append([]string{"deploy", "my-project", "dev", manifest, "-o", "json"}, extra...)...)
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if r.Deployment.Status != "succeeded" {
			t.Fatalf("deploy: %s", out)
		}
		return r
	}
	r := deploy()
	api := r.Outputs.Workloads["api"]
	if api["NS"] != "v1:dev-workloads.api.ns" || api["PINNED"] != "v1:workloads.api.pinned" || api["MOUNTED"] != "hello from a mounted module" {
		t.Fatalf("outputs of the git and mounted modules: %#v", api)
	}
	// The dependency's param (5) won over module_inputs (1) in Terraform.
	db := r.Outputs.Resources["db.default#workloads.api.app"]
	if fmt.Sprint(db["size"]) != "5" {
		t.Fatalf("the db's size: want the param 5, got %#v", db)
	}
	// humanitec_metadata is metadata, not a resource output; the sensitive
	// password is hidden.
	if md := r.Outputs.Metadata["k8s-namespace.default#workloads.api.ns"]; md["Namespace"] != "dev-workloads.api.ns" || md["Module-Version"] != "v1" {
		t.Fatalf("metadata: %#v", r.Outputs.Metadata)
	}
	if _, ok := r.Outputs.Resources["k8s-namespace.default#workloads.api.ns"]["humanitec_metadata"]; ok {
		t.Fatalf("metadata left among the outputs: %#v", r.Outputs.Resources)
	}
	if db["password"] != "(sensitive)" {
		t.Fatalf("the sensitive password is shown: %#v", db)
	}

	// The branch moves on: the unpinned module takes v2, the ?ref=v1 one
	// keeps v1's code.
	repo.commit("v2", "", map[string]string{"my-namespace-module/main.tf": gitNamespaceModule("v2")})
	r = deploy("--show-sensitive")
	api = r.Outputs.Workloads["api"]
	if api["NS"] != "v2:dev-workloads.api.ns" || api["PINNED"] != "v1:workloads.api.pinned" {
		t.Fatalf("after the branch moved: %#v", api)
	}
	if p := r.Outputs.Resources["db.default#workloads.api.app"]["password"]; p != "s3cret-basic-5" {
		t.Fatalf("the password asked for by an owner: %#v", p)
	}
	text := c.run("outputs", "my-project", "dev")
	for _, want := range []string{"Resource metadata:", "Module-Version: v2", "password: (sensitive)", "--show-sensitive"} {
		if !strings.Contains(text, want) {
			t.Fatalf("terrace outputs: want %q in\n%s", want, text)
		}
	}
	if strings.Contains(text, "s3cret") {
		t.Fatalf("terrace outputs shows a secret:\n%s", text)
	}

	// A team without access to the environment's workspace sees nothing
	// of its outputs; with access to its state outputs it reads them but
	// not the secrets; read access includes the state, and the secrets.
	team, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("developers")})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := e.Client.TeamTokens.Create(ctx, team.ID)
	if err != nil {
		t.Fatal(err)
	}
	dev := &terraceCLI{t: t, e: &testenv.Env{Host: e.Host, Token: tok.Token}, org: org, dir: c.dir}
	if out, err := dev.try("outputs", "my-project", "dev", "-o", "json"); err == nil || !strings.Contains(err.Error(), "404") || strings.Contains(out, "s3cret") {
		t.Fatalf("a team without access read the outputs: %v\n%s", err, out)
	}
	ws, err := e.Client.Workspaces.Read(ctx, org, "my-project-dev")
	if err != nil {
		t.Fatal(err)
	}
	access, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessCustom), Team: team, Workspace: ws,
		Runs: tfe.RunsPermission(tfe.RunsPermissionRead), StateVersions: tfe.StateVersionsPermission(tfe.StateVersionsPermissionReadOutputs)})
	if err != nil {
		t.Fatal(err)
	}
	if out := dev.run("outputs", "my-project", "dev", "-o", "json"); strings.Contains(out, "s3cret") || !strings.Contains(out, "(sensitive)") {
		t.Fatalf("a developer's outputs:\n%s", out)
	}
	if out, err := dev.try("outputs", "my-project", "dev", "--show-sensitive"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a developer asked for secrets: %v\n%s", err, out)
	}
	if _, err := e.Client.TeamAccess.Update(ctx, access.ID, tfe.TeamAccessUpdateOptions{Access: tfe.Access(tfe.AccessRead)}); err != nil {
		t.Fatal(err)
	}
	if out := dev.run("outputs", "my-project", "dev", "--show-sensitive", "-o", "json"); !strings.Contains(out, "s3cret-basic-5") {
		t.Fatalf("a team with read access asked for secrets:\n%s", out)
	}

	// A module switches between source kinds on update: git to inline and
	// back (setting both at once is refused).
	if _, err := c.try("update", "module", "my-namespace-module", "--set", "module_source_code="+namespaceModule); err == nil || !strings.Contains(err.Error(), "module_source_code") {
		t.Fatalf("a module with both sources: %v", err)
	}
	c.run("update", "module", "my-namespace-module", "--set", "module_source=", "--set", "module_source_code="+namespaceModule)
	if dry := c.run("deploy", "my-project", "dev", manifest, "--dry-run"); !strings.Contains(dry, "~ k8s-namespace.default#workloads.api.ns (module_changed)") || strings.Contains(dry, "pinned") {
		t.Fatalf("dry run after switching to inline code:\n%s", dry)
	}
	c.run("update", "module", "my-namespace-module", "--set", "module_source=git::"+repo.URL+"//my-namespace-module", "--set", "module_source_code=")
	if tf := c.run("tf", r.Deployment.ID, "--file", "main.tf"); !strings.Contains(tf, `"git::`+repo.URL+`//my-namespace-module?ref=v1"`) {
		t.Fatalf("the generated Terraform of the last deployment:\n%s", tf)
	}

	// A variable with no default and no input is fine while a param sets
	// it, and a compile error naming node, module and variable once not.
	c.run("update", "module", "db-module", "--set-json", "module_inputs={}")
	if out, err := c.try("deploy", "my-project", "dev", manifest, "--dry-run"); err != nil {
		t.Fatalf("a param sets size, yet: %v\n%s", err, out)
	}
	c.run("update", "module", "app-module", "--set-json", "dependencies={\"db\":{\"type\":\"db\"}}")
	if out, err := c.try("deploy", "my-project", "dev", manifest, "--dry-run"); err == nil ||
		!strings.Contains(err.Error(), "db.default#workloads.api.app") || !strings.Contains(err.Error(), `module "db-module": variable "size" has no default and no value`) {
		t.Fatalf("a variable nobody sets: %v\n%s", err, out)
	}
}

func greeterModule(version string) string {
	return `variable "greeting" { type = string }
resource "terraform_data" "g" { input = var.greeting }
output "text" { value = "${terraform_data.g.output} (` + version + `)" }
`
}

func greeterManifest(greeting string) string {
	return `
shared:
  g: {type: greeter, params: {greeting: ` + greeting + `}}
workloads:
  api:
    outputs:
      TEXT: ${shared.g.outputs.text}
`
}

// TestOrchestratorHistory deploys twice with a change (params and a new
// module version), reads the history, each deployment's graph and
// Terraform, diffs them, and rolls back: the environment's outputs return
// to the first deployment's. Idempotency keys make a retried deploy return
// the first one's deployment.
func TestOrchestratorHistory(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			e := testenv.New(t, testenv.Options{Store: st})
			testOrchestratorHistory(t, e)
		})
	}
}

func testOrchestratorHistory(t *testing.T, e *testenv.Env) {
	t.Setenv("SSL_CERT_FILE", e.CAFile)
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	c := &terraceCLI{t: t, e: e, org: org, dir: t.TempDir()}
	c.run("create", "environment-type", "development")
	c.run("create", "project", "my-project")
	c.run("create", "environment", "my-project", "dev", "--set", "env_type_id=development")
	c.run("create", "resource-type", "greeter", "--set-json", `output_schema={"type":"object"}`)
	c.run("create", "module", "greeter-module", "--set", "resource_type=greeter", "--set", "module_source_code="+greeterModule("v1"),
		"--set-json", `module_params={"greeting":{"type":"string"}}`)
	c.run("create", "module-rule", "--set", "module_id=greeter-module")

	type result struct {
		Deployment struct {
			ID, Mode, Status string
			RollbackTo       string `json:"rollback_to_deployment_id"`
		}
		Outputs struct {
			Workloads map[string]map[string]any
		}
	}
	parse := func(out string) result {
		t.Helper()
		var r result
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if r.Deployment.Status != "succeeded" {
			t.Fatalf("deployment: %s", out)
		}
		return r
	}
	m1 := c.file("m1.yaml", greeterManifest("hello"))
	r1 := parse(c.run("deploy", "my-project", "dev", m1, "-o", "json", "--idempotency-key", "first"))
	if got := r1.Outputs.Workloads["api"]["TEXT"]; got != "hello (v1)" {
		t.Fatalf("first deploy: %v", got)
	}
	// The same request again with its key is the same deployment; the key
	// with another manifest is a conflict.
	if again := parse(c.run("deploy", "my-project", "dev", m1, "-o", "json", "--idempotency-key", "first")); again.Deployment.ID != r1.Deployment.ID {
		t.Fatalf("a retried deploy made deployment %s, want %s", again.Deployment.ID, r1.Deployment.ID)
	}
	m2 := c.file("m2.yaml", greeterManifest("bonjour"))
	if out, err := c.try("deploy", "my-project", "dev", m2, "--idempotency-key", "first"); err == nil || !strings.Contains(err.Error(), "409") {
		t.Fatalf("a reused idempotency key: %v\n%s", err, out)
	}

	// The change: new params and a new module version.
	c.run("update", "module", "greeter-module", "--set", "module_source_code="+greeterModule("v2"))
	r2 := parse(c.run("deploy", "my-project", "dev", m2, "-o", "json"))
	if got := r2.Outputs.Workloads["api"]["TEXT"]; got != "bonjour (v2)" {
		t.Fatalf("second deploy: %v", got)
	}

	// History, newest first, as a table.
	hist := c.run("get", "deployments", "my-project", "dev")
	lines := strings.Split(strings.TrimSpace(hist), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID") || !strings.HasPrefix(lines[1], r2.Deployment.ID) || !strings.HasPrefix(lines[2], r1.Deployment.ID) || !strings.Contains(lines[2], "succeeded") {
		t.Fatalf("history:\n%s", hist)
	}
	// The node-level diff names the changed node only.
	diff := c.run("diff", "my-project", "dev")
	if !strings.Contains(diff, "~ greeter.default#shared.g (module_changed)") || !strings.Contains(diff, "0 added, 1 changed, 0 removed") || strings.Contains(diff, "workload") {
		t.Fatalf("terrace diff:\n%s", diff)
	}
	if back := c.run("diff", r1.Deployment.ID, r2.Deployment.ID); !strings.Contains(back, "Changes from "+r2.Deployment.ID+" to "+r1.Deployment.ID) || !strings.Contains(back, "greeter.default#shared.g") {
		t.Fatalf("diff between two named deployments:\n%s", back)
	}
	if first := c.run("diff", r1.Deployment.ID); !strings.Contains(first, "2 added") {
		t.Fatalf("the first deployment's diff:\n%s", first)
	}
	// A past deployment's graph and Terraform.
	var g struct {
		Nodes []struct{ Type, Module string }
	}
	if err := json.Unmarshal([]byte(c.run("graph", r1.Deployment.ID, "-o", "json")), &g); err != nil || len(g.Nodes) != 2 {
		t.Fatalf("graph of %s: %v %+v", r1.Deployment.ID, err, g)
	}
	tf1 := c.run("tf", r1.Deployment.ID)
	if !strings.Contains(tf1, `"hello"`) || !strings.Contains(tf1, "(v1)") || strings.Contains(tf1, "bonjour") {
		t.Fatalf("terraform of the first deployment:\n%s", tf1)
	}
	if main := c.run("tf", r2.Deployment.ID, "--file", "main.tf"); !strings.Contains(main, `"bonjour"`) || strings.Contains(main, "# ---") {
		t.Fatalf("main.tf of the second deployment:\n%s", main)
	}

	// Rollback is a new deployment that returns the outputs to the first's.
	rb := parse(c.run("rollback", "my-project", "dev", r1.Deployment.ID, "-o", "json"))
	if rb.Deployment.Mode != "rollback" || rb.Deployment.RollbackTo != r1.Deployment.ID || rb.Deployment.ID == r1.Deployment.ID {
		t.Fatalf("rollback deployment: %+v", rb.Deployment)
	}
	if got, want := rb.Outputs.Workloads["api"]["TEXT"], r1.Outputs.Workloads["api"]["TEXT"]; got != want {
		t.Fatalf("after the rollback TEXT is %v, want the first deployment's %v", got, want)
	}
	if d := c.run("diff", rb.Deployment.ID, r1.Deployment.ID); !strings.Contains(d, "No changes") {
		t.Fatalf("the rollback differs from its target:\n%s", d)
	}
	if out, err := c.try("rollback", "my-project", "dev", "dep-missing"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("a rollback to nothing: %v\n%s", err, out)
	}
}
