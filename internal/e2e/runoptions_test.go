package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/testprovider"
)

// Run options of the API-driven workflow, executed by the real terraform
// and checked by what they did to the workspace's state.

// stateResources is the current state of a workspace: its serial and, by
// address (type.name, first instance), the attributes of each managed
// resource, dynamic values unwrapped.
func stateResources(ctx context.Context, t *testing.T, c *tfe.Client, wsID string) (int64, map[string]map[string]any) {
	t.Helper()
	sv, err := c.StateVersions.ReadCurrent(ctx, wsID)
	if err != nil {
		t.Fatalf("reading the current state version: %v", err)
	}
	raw, err := c.StateVersions.Download(ctx, sv.DownloadURL)
	if err != nil {
		t.Fatalf("downloading the state: %v", err)
	}
	var doc struct {
		Serial    int64 `json:"serial"`
		Resources []struct {
			Mode, Type, Name string
			Instances        []struct {
				Attributes map[string]any `json:"attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("the state is not JSON: %v", err)
	}
	out := map[string]map[string]any{}
	for _, r := range doc.Resources {
		if r.Mode == "managed" && len(r.Instances) > 0 {
			attrs := r.Instances[0].Attributes
			for k, v := range attrs {
				// Dynamic attributes (terraform_data's input and output)
				// are stored as {"type": …, "value": …}.
				if m, ok := v.(map[string]any); ok && len(m) == 2 && m["type"] != nil {
					attrs[k] = m["value"]
				}
			}
			out[r.Type+"."+r.Name] = attrs
		}
	}
	return doc.Serial, out
}

// uploadFiles creates a configuration version (auto-queue-runs off, or
// left unset with autoQueue) through c and uploads files to it.
// redactedPlanJSON reads a plan's json-output-redacted as c (go-tfe has
// no method for it).
func redactedPlanJSON(ctx context.Context, c *tfe.Client, planID string) ([]byte, error) {
	req, err := c.NewRequest("GET", "plans/"+planID+"/json-output-redacted", nil)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	err = req.Do(ctx, &buf)
	return buf.Bytes(), err
}

func uploadFiles(ctx context.Context, t *testing.T, c *tfe.Client, wsID string, files map[string]string, autoQueue bool) *tfe.ConfigurationVersion {
	t.Helper()
	opts := tfe.ConfigurationVersionCreateOptions{}
	if !autoQueue {
		opts.AutoQueueRuns = tfe.Bool(false)
	}
	cv, err := c.ConfigurationVersions.Create(ctx, wsID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigurationVersions.Upload(ctx, cv.UploadURL, writeConfig(t, files)); err != nil {
		t.Fatal(err)
	}
	if cv, err = c.ConfigurationVersions.Read(ctx, cv.ID); err != nil || cv.Status != tfe.ConfigurationUploaded {
		t.Fatalf("configuration version after its upload: %+v %v", cv, err)
	}
	return cv
}

func TestAPIDrivenAutoQueue(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	testenv.ForEachStore(t, testAPIDrivenAutoQueue)
}

// testAPIDrivenAutoQueue follows HashiCorp's API-driven workflow: create a
// configuration version without auto-queue-runs, upload, and the run
// starts by itself, as whoever created the version.
func testAPIDrivenAutoQueue(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	org := testenv.NewOrg(t, e.Client, "acme")
	teams, err := e.Client.Teams.List(ctx, org.Name, nil)
	if err != nil || len(teams.Items) == 0 {
		t.Fatalf("listing teams: %v", err)
	}
	ci, member := e.UserClient(t, org.Name, "ci@acme.test", teams.Items[0]) // the owners team
	ws, err := ci.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("api"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadFiles(ctx, t, ci, ws.ID, map[string]string{"main.tf": `resource "terraform_data" "a" { input = "queued" }`}, true)
	if !cv.AutoQueueRuns || cv.Error != "" {
		t.Fatalf("configuration version: auto-queue-runs %v, error %q %q", cv.AutoQueueRuns, cv.Error, cv.ErrorMessage)
	}
	runs, err := ci.Runs.List(ctx, ws.ID, nil)
	if err != nil || len(runs.Items) != 1 {
		t.Fatalf("the upload queued %d runs (%v), want 1", len(runs.Items), err)
	}
	r := waitRun(ctx, t, ci, runs.Items[0].ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("the queued run is %s", r.Status)
	}
	if r.ConfigurationVersion == nil || r.ConfigurationVersion.ID != cv.ID || r.Source != tfe.RunSourceConfigurationVersion {
		t.Fatalf("the queued run: configuration version %+v, source %s", r.ConfigurationVersion, r.Source)
	}
	if r.CreatedBy == nil || r.CreatedBy.ID != member.User.ID {
		t.Fatalf("the queued run names %+v as its creator, want %s", r.CreatedBy, member.User.ID)
	}
	if _, res := stateResources(ctx, t, ci, ws.ID); res["terraform_data.a"]["output"] != "queued" {
		t.Fatalf("the state after the queued run: %v", res)
	}

	// A workspace that executes locally cannot take the run: the version
	// and the workspace (through its current configuration version) say why.
	local, err := ci.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("laptop"), ExecutionMode: tfe.String("local")})
	if err != nil {
		t.Fatal(err)
	}
	cv = uploadFiles(ctx, t, ci, local.ID, map[string]string{"main.tf": `resource "terraform_data" "a" {}`}, true)
	if cv.Error != "run-queue-failed" || !strings.Contains(cv.ErrorMessage, "local execution") {
		t.Fatalf("a refused queueing shows error %q, message %q", cv.Error, cv.ErrorMessage)
	}
	w, err := ci.Workspaces.ReadWithOptions(ctx, org.Name, local.Name, &tfe.WorkspaceReadOptions{Include: []tfe.WSIncludeOpt{tfe.WSCurrentConfigVer}})
	if err != nil {
		t.Fatal(err)
	}
	if w.CurrentConfigurationVersion == nil || w.CurrentConfigurationVersion.ID != cv.ID || w.CurrentConfigurationVersion.ErrorMessage != cv.ErrorMessage {
		t.Fatalf("the workspace does not show why no run was queued: %+v", w.CurrentConfigurationVersion)
	}
}

// runDebug is a run creation with debugging-mode, which go-tfe v1.109.0
// cannot send.
type runDebug struct {
	ID            string                    `jsonapi:"primary,runs"`
	PlanOnly      bool                      `jsonapi:"attr,plan-only"`
	DebuggingMode bool                      `jsonapi:"attr,debugging-mode"`
	Workspace     *tfe.Workspace            `jsonapi:"relation,workspace"`
	Config        *tfe.ConfigurationVersion `jsonapi:"relation,configuration-version"`
}

const optionsConfig = `
variable "v" {
  type    = string
  default = "one"
}
variable "secret" {
  type      = string
  default   = ""
  sensitive = true
}
resource "terraform_data" "a" { input = "a-${var.v}" }
resource "terraform_data" "b" { input = "b-${var.v}" }
resource "terraform_data" "s" { input = sha256(var.secret) }
`

func TestRunOptionsAPI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	testenv.ForEachStore(t, testRunOptionsAPI)
}

func testRunOptionsAPI(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	const secret = "Tr4ce-S3cret-value"
	ws := workspaceWithSecret(ctx, t, c, "opts", secret)
	cv := uploadFiles(ctx, t, c, ws.ID, map[string]string{"main.tf": optionsConfig}, false)
	run := func(o tfe.RunCreateOptions, want ...tfe.RunStatus) *tfe.Run {
		t.Helper()
		o.Workspace, o.ConfigurationVersion = ws, cv
		r, err := c.Runs.Create(ctx, o)
		if err != nil {
			t.Fatalf("creating a run: %v", err)
		}
		return waitRun(ctx, t, c, r.ID, 2*time.Minute, want...)
	}
	v := func(val string) []*tfe.RunVariable { return []*tfe.RunVariable{{Key: "v", Value: `"` + val + `"`}} }
	id := func(res map[string]map[string]any, addr string) any { return res[addr]["id"] }

	// Run variables reach terraform and win over the configuration's default.
	run(tfe.RunCreateOptions{AutoApply: tfe.Bool(true), Variables: v("two")}, tfe.RunApplied)
	serial, res := stateResources(ctx, t, c, ws.ID)
	if res["terraform_data.a"]["output"] != "a-two" || res["terraform_data.b"]["output"] != "b-two" {
		t.Fatalf("run variables: state %v", res)
	}
	before := res

	// replace-addrs replaces exactly the named resource.
	r := run(tfe.RunCreateOptions{AutoApply: tfe.Bool(true), Variables: v("two"), ReplaceAddrs: []string{"terraform_data.b"}}, tfe.RunApplied)
	_, res = stateResources(ctx, t, c, ws.ID)
	if id(res, "terraform_data.b") == id(before, "terraform_data.b") || id(res, "terraform_data.a") != id(before, "terraform_data.a") ||
		id(res, "terraform_data.s") != id(before, "terraform_data.s") || res["terraform_data.b"]["output"] != "b-two" {
		t.Fatalf("replace-addrs: before %v, after %v", before, res)
	}
	if len(r.ReplaceAddrs) != 1 || r.Plan == nil {
		t.Fatalf("the run does not echo replace-addrs: %+v", r)
	}
	checkAppliedPlanDescribed(ctx, t, c, r, secret)
	before = res

	// target-addrs changes only the targeted resource.
	run(tfe.RunCreateOptions{AutoApply: tfe.Bool(true), Variables: v("three"), TargetAddrs: []string{"terraform_data.a"}}, tfe.RunApplied)
	serial2, res := stateResources(ctx, t, c, ws.ID)
	if res["terraform_data.a"]["output"] != "a-three" || res["terraform_data.b"]["output"] != "b-two" || id(res, "terraform_data.b") != id(before, "terraform_data.b") {
		t.Fatalf("target-addrs: state %v", res)
	}
	if serial2 <= serial {
		t.Fatalf("serial %d after %d: the targeted apply stored no state", serial2, serial)
	}

	// A plan-only run plans and changes nothing.
	r = run(tfe.RunCreateOptions{PlanOnly: tfe.Bool(true), Variables: v("four")}, tfe.RunPlannedAndFinished, tfe.RunErrored)
	if r.Status != tfe.RunPlannedAndFinished || !r.HasChanges || r.Actions.IsConfirmable {
		t.Fatalf("plan-only run: %s, has-changes %v, confirmable %v", r.Status, r.HasChanges, r.Actions.IsConfirmable)
	}
	if s, _ := stateResources(ctx, t, c, ws.ID); s != serial2 {
		t.Fatalf("a plan-only run changed the state (serial %d -> %d)", serial2, s)
	}

	// terraform-version: HCP Terraform allows it on plan-only runs only.
	ver := terraformVersion(t)
	r = run(tfe.RunCreateOptions{PlanOnly: tfe.Bool(true), TerraformVersion: tfe.String(ver)}, tfe.RunPlannedAndFinished, tfe.RunErrored)
	if r.Status != tfe.RunPlannedAndFinished || r.TerraformVersion != ver {
		t.Fatalf("plan-only run with terraform-version %s: %s, version %q", ver, r.Status, r.TerraformVersion)
	}
	req, err := c.NewRequest("POST", "runs", &tfe.RunCreateOptions{Workspace: ws, TerraformVersion: tfe.String("1.5.7")})
	if err != nil {
		t.Fatal(err)
	}
	if err := req.Do(ctx, nil); err == nil || !strings.Contains(err.Error(), "plan-only") {
		t.Fatalf("terraform-version on a run that applies: %v, want a refusal naming plan-only", err)
	}

	// No changes: the run ends at planned_and_finished unless
	// allow-empty-apply, which applies anyway.
	r = run(tfe.RunCreateOptions{AutoApply: tfe.Bool(true), Variables: v("three"), TargetAddrs: []string{"terraform_data.a"}}, tfe.RunPlannedAndFinished, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunPlannedAndFinished || r.HasChanges {
		t.Fatalf("a run without changes: %s, has-changes %v", r.Status, r.HasChanges)
	}
	r = run(tfe.RunCreateOptions{AutoApply: tfe.Bool(true), AllowEmptyApply: tfe.Bool(true), Variables: v("three"), TargetAddrs: []string{"terraform_data.a"}},
		tfe.RunPlannedAndFinished, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied || r.HasChanges {
		t.Fatalf("allow-empty-apply without changes: %s, has-changes %v", r.Status, r.HasChanges)
	}
	if _, res = stateResources(ctx, t, c, ws.ID); res["terraform_data.a"]["output"] != "a-three" || res["terraform_data.b"]["output"] != "b-two" {
		t.Fatalf("an empty apply changed resources: %v", res)
	}

	// debugging-mode: terraform logs at TRACE level into the plan log,
	// with sensitive values masked like the rest of it.
	req, err = c.NewRequest("POST", "runs", &runDebug{PlanOnly: true, DebuggingMode: true, Workspace: ws, Config: cv})
	if err != nil {
		t.Fatal(err)
	}
	var dbg tfe.Run
	if err := req.Do(ctx, &dbg); err != nil {
		t.Fatal(err)
	}
	r = waitRun(ctx, t, c, dbg.ID, 2*time.Minute, tfe.RunPlannedAndFinished, tfe.RunErrored)
	logs := phaseLogs(ctx, t, e, r)
	if r.Status != tfe.RunPlannedAndFinished || !strings.Contains(logs[0], "[TRACE]") {
		t.Fatalf("debugging-mode run %s; plan log without TRACE lines:\n%.2000s", r.Status, logs[0])
	}
	if strings.Contains(logs[0], secret) {
		t.Fatal("a sensitive value reached a debugging-mode log")
	}

	// Bad combinations are JSON:API errors.
	for _, o := range []tfe.RunCreateOptions{
		{IsDestroy: tfe.Bool(true), RefreshOnly: tfe.Bool(true)},
		{Variables: []*tfe.RunVariable{{Key: "", Value: `"x"`}}},
	} {
		o.Workspace = ws
		req, err := c.NewRequest("POST", "runs", &o)
		if err != nil {
			t.Fatal(err)
		}
		if err := req.Do(ctx, nil); err == nil || !strings.Contains(err.Error(), "invalid attribute") {
			t.Fatalf("a bad run was not refused as invalid: %v", err)
		}
	}

	// is-destroy destroys everything.
	r = run(tfe.RunCreateOptions{IsDestroy: tfe.Bool(true), AutoApply: tfe.Bool(true)}, tfe.RunApplied, tfe.RunErrored)
	if r.Status != tfe.RunApplied {
		t.Fatalf("destroy run: %s", r.Status)
	}
	if _, res = stateResources(ctx, t, c, ws.ID); len(res) != 0 {
		t.Fatalf("resources left after a destroy run: %v", res)
	}
}

// terraformVersion is the version of the terraform on PATH.
func terraformVersion(t *testing.T) string {
	out, err := exec.Command(engines(t)[0].Path, "version", "-json").Output()
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Version string `json:"terraform_version"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Version == "" {
		t.Fatalf("terraform version -json: %s %v", out, err)
	}
	return v.Version
}

// withCLIConfig appends text to the CLI's configuration file (the last
// TF_CLI_CONFIG_FILE of its environment: the one that wins).
func withCLIConfig(t *testing.T, c *cli, text string) {
	for i := len(c.env) - 1; i >= 0; i-- {
		kv := c.env[i]
		if path, ok := strings.CutPrefix(kv, "TF_CLI_CONFIG_FILE="); ok {
			f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteString("\n" + text); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
	t.Fatal("the CLI has no TF_CLI_CONFIG_FILE")
}

const cliOptionsConfig = `
variable "v" {
  type    = string
  default = "one"
}
variable "path" { type = string }
resource "local_file" "f" {
  filename = var.path
  content  = "hello"
}
resource "terraform_data" "a" { input = "a-${var.v}" }
resource "terraform_data" "b" { input = "b-${var.v}" }
`

func TestRunOptionsCLI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	bin := engines(t)[0].Path
	mirror, err := testprovider.WriteMirror(t.TempDir(), testprovider.Options{Providers: []testprovider.Provider{testprovider.Null, testprovider.Time, testprovider.Local}})
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{Store: st, RunCLIConfig: mirror})
			c := newCLI(t, e, bin)
			withCLIConfig(t, c, mirror)
			testRunOptionsCLI(t, e, c)
		})
	}
}

// testRunOptionsCLI drives run options through terraform's cloud block
// (remote execution): -replace, -target, -var, -refresh-only, saved cloud
// plans (plan -out, show, apply) and a stale one, and destroy.
func testRunOptionsCLI(t *testing.T, e *testenv.Env, c *cli) {
	ctx := context.Background()
	org := testenv.NewOrg(t, e.Client, "acme")
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, org.Name, "cli") + cliOptionsConfig})
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org.Name, "cli")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "managed.txt")
	if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("path"), Value: tfe.String(file),
		Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
		t.Fatal(err)
	}
	content := func() string {
		b, err := os.ReadFile(file)
		if err != nil {
			return "(absent)"
		}
		return string(b)
	}
	latest := func() *tfe.Run {
		t.Helper()
		runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
		if err != nil || len(runs.Items) == 0 {
			t.Fatalf("listing runs: %v", err)
		}
		return runs.Items[0]
	}
	id := func(res map[string]map[string]any, addr string) any { return res[addr]["id"] }

	c.run(dir, "apply", "-auto-approve")
	_, before := stateResources(ctx, t, e.Client, ws.ID)
	if content() != "hello" || len(before) != 3 {
		t.Fatalf("first apply: file %q, state %v", content(), before)
	}

	// -replace replaces exactly the named resource.
	out := c.run(dir, "apply", "-auto-approve", "-replace=terraform_data.b")
	_, res := stateResources(ctx, t, e.Client, ws.ID)
	if id(res, "terraform_data.b") == id(before, "terraform_data.b") || id(res, "terraform_data.a") != id(before, "terraform_data.a") ||
		id(res, "local_file.f") != id(before, "local_file.f") || !strings.Contains(out, "1 added, 0 changed, 1 destroyed") {
		t.Fatalf("-replace: before %v, after %v\n%s", before, res, out)
	}
	if r := latest(); len(r.ReplaceAddrs) != 1 || r.ReplaceAddrs[0] != "terraform_data.b" {
		t.Fatalf("the run has replace-addrs %v", r.ReplaceAddrs)
	}
	before = res

	// -target with a run variable changes only the targeted resource.
	c.run(dir, "apply", "-auto-approve", "-target=terraform_data.a", "-var", "v=two")
	_, res = stateResources(ctx, t, e.Client, ws.ID)
	if res["terraform_data.a"]["output"] != "a-two" || res["terraform_data.b"]["output"] != "b-one" || id(res, "terraform_data.b") != id(before, "terraform_data.b") {
		t.Fatalf("-target: state %v", res)
	}
	if r := latest(); len(r.TargetAddrs) != 1 || len(r.Variables) != 1 {
		t.Fatalf("the run has target-addrs %v, variables %v", r.TargetAddrs, r.Variables)
	}
	before = res

	// Drift: the file changes behind terraform's back. -refresh-only
	// records it in the state and changes no resource: the file keeps
	// what was written to it.
	if err := os.WriteFile(file, []byte("changed by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	out = c.run(dir, "apply", "-refresh-only", "-auto-approve", "-var", "v=two")
	_, res = stateResources(ctx, t, e.Client, ws.ID)
	if _, ok := res["local_file.f"]; ok || content() != "changed by hand" {
		t.Fatalf("-refresh-only: file %q, state %v\n%s", content(), res, out)
	}
	if id(res, "terraform_data.a") != id(before, "terraform_data.a") || id(res, "terraform_data.b") != id(before, "terraform_data.b") {
		t.Fatalf("-refresh-only changed resources: before %v, after %v", before, res)
	}
	if r := latest(); !r.RefreshOnly || r.Status != tfe.RunApplied {
		t.Fatalf("the refresh-only run: refresh-only %v, %s", r.RefreshOnly, r.Status)
	}

	// A saved cloud plan: plan -out, show, then apply it.
	out = c.run(dir, "plan", "-out=saved.tfplan", "-var", "v=two")
	if !strings.Contains(out, "local_file.f will be created") {
		t.Fatalf("plan -out:\n%s", out)
	}
	saved := latest()
	if saved.Status != tfe.RunPlannedAndSaved || !saved.SavePlan {
		t.Fatalf("the saved plan's run: %s, save-plan %v", saved.Status, saved.SavePlan)
	}
	if content() != "changed by hand" {
		t.Fatal("plan -out changed the file")
	}
	if out = c.run(dir, "show", "saved.tfplan"); !strings.Contains(out, "local_file.f") {
		t.Fatalf("show of a saved cloud plan:\n%s", out)
	}
	c.run(dir, "apply", "saved.tfplan")
	_, res = stateResources(ctx, t, e.Client, ws.ID)
	if _, ok := res["local_file.f"]; !ok || content() != "hello" || res["terraform_data.a"]["output"] != "a-two" {
		t.Fatalf("apply of a saved plan: file %q, state %v", content(), res)
	}
	if r := waitRun(ctx, t, e.Client, saved.ID, time.Minute, tfe.RunApplied); r.ID != saved.ID {
		t.Fatal("unreachable")
	}

	// A saved plan goes stale when another run applies first: the other
	// run is not blocked by it, and terraform refuses the stale plan with
	// HCP Terraform's message.
	c.run(dir, "plan", "-out=stale.tfplan", "-var", "v=three")
	stale := latest()
	c.run(dir, "apply", "-auto-approve", "-target=terraform_data.a", "-var", "v=four")
	if r, err := e.Client.Runs.Read(ctx, stale.ID); err != nil || r.Status != tfe.RunDiscarded {
		t.Fatalf("the stale saved plan's run: %+v %v", r, err)
	}
	stdout, stderr, err := c.try(dir, "apply", "stale.tfplan")
	if err == nil || !strings.Contains(stdout+stderr, "Saved plan is discarded") {
		t.Fatalf("apply of a stale saved plan: %v\n%s%s", err, stdout, stderr)
	}
	_, res = stateResources(ctx, t, e.Client, ws.ID)
	if res["terraform_data.a"]["output"] != "a-four" || res["terraform_data.b"]["output"] != "b-two" {
		t.Fatalf("after the refused stale plan: state %v", res)
	}

	// The same drift through the API: a refresh-only run records it.
	if err := os.WriteFile(file, []byte("changed through the API test"), 0o644); err != nil {
		t.Fatal(err)
	}
	serial, _ := stateResources(ctx, t, e.Client, ws.ID)
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, RefreshOnly: tfe.Bool(true), AutoApply: tfe.Bool(true),
		Variables: []*tfe.RunVariable{{Key: "v", Value: `"four"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if r = waitRun(ctx, t, e.Client, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored, tfe.RunPlannedAndFinished); r.Status != tfe.RunApplied {
		t.Fatalf("refresh-only run through the API: %s", r.Status)
	}
	serial2, res := stateResources(ctx, t, e.Client, ws.ID)
	if _, ok := res["local_file.f"]; ok || serial2 <= serial || content() != "changed through the API test" || res["terraform_data.a"]["output"] != "a-four" {
		t.Fatalf("refresh-only through the API: serial %d -> %d, file %q, state %v", serial, serial2, content(), res)
	}
	c.run(dir, "apply", "-auto-approve", "-var", "v=four")
	if content() != "hello" {
		t.Fatalf("the file was not written again: %q", content())
	}

	// destroy (is-destroy) removes every resource, the file too.
	c.run(dir, "destroy", "-auto-approve", "-var", "v=four")
	if _, res = stateResources(ctx, t, e.Client, ws.ID); len(res) != 0 || content() != "(absent)" {
		t.Fatalf("after destroy: file %q, state %v", content(), res)
	}
	if r := latest(); !r.IsDestroy {
		t.Fatal("the destroy run is not is-destroy")
	}
}

// workspaceWithSecret makes a workspace in a new organization "acme"
// with the sensitive terraform variable "secret".
func workspaceWithSecret(ctx context.Context, t *testing.T, c *tfe.Client, name, secret string) *tfe.Workspace {
	t.Helper()
	org := testenv.NewOrg(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("secret"), Value: tfe.String(secret),
		Category: tfe.Category(tfe.CategoryTerraform), Sensitive: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	return ws
}

// checkAppliedPlanDescribed checks what the API says about the plan of a
// run that applied in the same job as its plan (auto-apply, nothing in
// between), whose JSON the runner makes beside the apply: the plan's and
// the apply's counts (one replacement: one added, one destroyed), the
// plan JSON with that replacement, and the redacted JSON with the provider
// schemas and without the sensitive value.
func checkAppliedPlanDescribed(ctx context.Context, t *testing.T, c *tfe.Client, r *tfe.Run, secret string) {
	t.Helper()
	p, err := c.Plans.Read(ctx, r.Plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	if p.ResourceAdditions != 1 || p.ResourceDestructions != 1 || p.ResourceChanges != 0 {
		t.Fatalf("plan counts %d added, %d changed, %d destroyed; want 1, 0, 1", p.ResourceAdditions, p.ResourceChanges, p.ResourceDestructions)
	}
	a, err := c.Applies.Read(ctx, r.Apply.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a.ResourceAdditions != 1 || a.ResourceDestructions != 1 {
		t.Fatalf("apply counts %d added, %d destroyed; want 1, 1", a.ResourceAdditions, a.ResourceDestructions)
	}
	raw, err := c.Plans.ReadJSONOutput(ctx, r.Plan.ID)
	if err != nil {
		t.Fatalf("the plan JSON of an auto-applied run: %v", err)
	}
	var doc struct {
		ResourceChanges []struct {
			Address string `json:"address"`
			Change  struct {
				Actions []string `json:"actions"`
			} `json:"change"`
		} `json:"resource_changes"`
		ProviderSchemas json.RawMessage `json:"provider_schemas"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("plan JSON: %v", err)
	}
	replaced := false
	for _, rc := range doc.ResourceChanges {
		replaced = replaced || rc.Address == "terraform_data.b" && len(rc.Change.Actions) == 2
	}
	if !replaced {
		t.Fatalf("the plan JSON does not show terraform_data.b replaced: %s", raw)
	}
	redacted, err := redactedPlanJSON(ctx, c, r.Plan.ID)
	if err != nil {
		t.Fatalf("the redacted plan JSON of an auto-applied run: %v", err)
	}
	doc.ProviderSchemas = nil
	if err := json.Unmarshal(redacted, &doc); err != nil || len(doc.ProviderSchemas) < 10 {
		t.Fatalf("the redacted plan JSON has no provider schemas (%v): %.300s", err, redacted)
	}
	if strings.Contains(string(redacted), secret) {
		t.Fatal("the redacted plan JSON holds the sensitive value")
	}
}
