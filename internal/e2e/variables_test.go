package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"
	"github.com/hashicorp/go-version"

	"github.com/terracehq/terrace/internal/testenv"
)

// Variable precedence in a remote run, as HCP Terraform documents it:
// workspace variables overwrite the configuration's terraform.tfvars and
// *.auto.tfvars files, whatever their names, and run variables (the CLI's
// -var, the API's run variables) overwrite workspace variables.
//
// Each variable is set in terraform.tfvars and in two auto files that
// sort after any name the runner could give its own files; some also in
// the workspace (plain, HCL, sensitive), one also by the run.
const precedenceConfig = `
variable "files" { type = string }
variable "ws" { type = string }
variable "ws_hcl" { type = list(string) }
variable "ws_json" { type = string }
variable "run" { type = string }
variable "secret" {
  type      = string
  sensitive = true
}
resource "terraform_data" "r" {
  input = [var.files, var.ws, var.run]
}
output "files" { value = var.files }
output "ws" { value = var.ws }
output "ws_hcl" { value = join(",", var.ws_hcl) }
output "ws_json" { value = var.ws_json }
output "run" { value = var.run }
output "secret_sha" { value = nonsensitive(sha256(var.secret)) }
output "tfvars_files" { value = join(",", sort(fileset(path.module, "**/*tfvars*"))) }
`

// ephemeralConfig adds, for engines with ephemeral variables, one that
// only an apply sees: terraform asks for it again when it applies a saved
// plan, and the provisioner fails the apply unless the workspace's value
// won there too.
const ephemeralConfig = `
variable "eph" {
  type      = string
  ephemeral = true
}
resource "terraform_data" "eph" {
  triggers_replace = timestamp()
  provisioner "local-exec" {
    command = "test \"${var.eph}\" = fromws"
  }
}
`

var precedenceFiles = map[string]string{
	"terraform.tfvars": `files = "tfvars"
ws = "tfvars"
ws_hcl = ["tfvars"]
ws_json = "tfvars"
run = "tfvars"
secret = "tfvars"
`,
	"zzz.auto.tfvars": `files = "fromzzz"
ws = "fromzzz"
ws_hcl = ["fromzzz"]
run = "fromzzz"
secret = "fromzzz"
`,
	"zzz.auto.tfvars.json": `{"ws_json": "fromzzzjson", "ws": "fromzzzjson"}`,
}

// atLeast says whether eng is at least the version named for its kind
// ("" for none).
func atLeast(t *testing.T, eng testenv.Engine, terraform, tofu string) bool {
	t.Helper()
	want := terraform
	if eng.Name == "tofu" {
		want = tofu
	}
	if want == "" {
		return false
	}
	have, err := version.NewVersion(eng.Version)
	if err != nil {
		t.Fatal(err)
	}
	return have.GreaterThanOrEqual(version.Must(version.NewVersion(want)))
}

func TestVariablePrecedence(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	// The order is the runner's doing, the same on either store: one
	// store, every engine.
	for _, eng := range engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			e := testenv.New(t, testenv.Options{})
			testVariablePrecedence(t, e, newEngineCLI(t, e, eng), eng)
		})
	}
}

func testVariablePrecedence(t *testing.T, e *testenv.Env, c *cli, eng testenv.Engine) {
	ctx := context.Background()
	const org, secret = "acme", "Pr3cedence-s3cret-Value"
	testenv.NewOrg(t, e.Client, org)
	ephemeral := atLeast(t, eng, "1.10.0", "1.11.0")
	files := map[string]string{"main.tf": cloudBlock(e.Host, org, "precedence") + precedenceConfig}
	for name, text := range precedenceFiles {
		files[name] = text
	}
	vars := []tfe.VariableCreateOptions{
		{Key: tfe.String("ws"), Value: tfe.String("fromws")},
		{Key: tfe.String("ws_hcl"), Value: tfe.String(`["fromws"]`), HCL: tfe.Bool(true)},
		{Key: tfe.String("ws_json"), Value: tfe.String("fromws")},
		{Key: tfe.String("run"), Value: tfe.String("fromws")},
		{Key: tfe.String("secret"), Value: tfe.String(secret), Sensitive: tfe.Bool(true)},
	}
	if ephemeral {
		files["eph.tf"] = ephemeralConfig
		files["zzz.auto.tfvars"] += "eph = \"fromzzz\"\n"
		vars = append(vars, tfe.VariableCreateOptions{Key: tfe.String("eph"), Value: tfe.String("fromws")})
	}
	dir := writeConfig(t, files)
	c.run(dir, "init")
	ws, err := e.Client.Workspaces.Read(ctx, org, "precedence")
	if err != nil {
		t.Fatal(err)
	}
	var wsVar *tfe.Variable
	for _, v := range vars {
		v.Category = tfe.Category(tfe.CategoryTerraform)
		made, err := e.Client.Variables.Create(ctx, ws.ID, v)
		if err != nil {
			t.Fatal(err)
		}
		if made.Key == "ws" {
			wsVar = made
		}
	}
	sum := sha256.Sum256([]byte(secret))
	want := map[string]string{
		"files":      "fromzzz", // terraform's own order among the files
		"ws":         "fromws",
		"ws_hcl":     "fromws",
		"ws_json":    "fromws",
		"run":        "fromws",
		"secret_sha": hex.EncodeToString(sum[:]),
		// The runner's variable files are not part of the configuration.
		"tfvars_files": "terraform.tfvars,zzz.auto.tfvars,zzz.auto.tfvars.json",
	}
	noSecret := func(out string) {
		t.Helper()
		if strings.Contains(out, secret) {
			t.Fatalf("the sensitive value reached the output:\n%s", out)
		}
	}

	// A speculative plan from the CLI, with and without -var.
	out := c.run(dir, "plan")
	noSecret(out)
	checkPlannedOutputs(t, out, want)
	out = c.run(dir, "plan", "-var", "run=fromcli")
	noSecret(out)
	checkPlannedOutputs(t, out, with(want, "run", "fromcli"))

	// apply -var from the CLI: the plan and apply of one job.
	out = c.run(dir, "apply", "-auto-approve", "-var", "run=fromcli")
	noSecret(out)
	checkStateOutputs(ctx, t, e.Client, ws.ID, with(want, "run", "fromcli"))

	// An API run with a run variable, confirmed: the apply is a job of
	// its own, from the saved plan.
	cv, err := e.Client.ConfigurationVersions.List(ctx, ws.ID, nil)
	if err != nil || len(cv.Items) == 0 {
		t.Fatalf("configuration versions: %v", err)
	}
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{
		Workspace: ws, ConfigurationVersion: cv.Items[0],
		Variables: []*tfe.RunVariable{{Key: "run", Value: `"fromapi"`}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if r = waitRun(ctx, t, e.Client, r.ID, 2*time.Minute, tfe.RunPlanned, tfe.RunErrored); r.Status != tfe.RunPlanned {
		t.Fatalf("the API run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, e.Client, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
	}
	// A workspace variable changed while the run waits: the apply
	// applies the plan's value. terraform refuses a -var-file value that
	// differs from its saved plan's, so none may reach it; OpenTofu
	// refuses any source that differs, the configuration's own files too,
	// so the runner gives it the plan's values last.
	if _, err := e.Client.Variables.Update(ctx, ws.ID, wsVar.ID, tfe.VariableUpdateOptions{Value: tfe.String("changed")}); err != nil {
		t.Fatal(err)
	}
	if err := e.Client.Runs.Apply(ctx, r.ID, tfe.RunApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if r = waitRun(ctx, t, e.Client, r.ID, 2*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("the confirmed run ended %s: %s\n%s", r.Status, erroredReason(ctx, t, e.Client, r.ID), strings.Join(phaseLogs(ctx, t, e, r), "\n"))
	}
	checkStateOutputs(ctx, t, e.Client, ws.ID, with(want, "run", "fromapi"))

	runs, err := e.Client.Runs.List(ctx, ws.ID, &tfe.RunListOptions{ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs.Items {
		for _, log := range phaseLogs(ctx, t, e, r) {
			if strings.Contains(log, secret) {
				t.Fatalf("run %s's log holds the sensitive value", r.ID)
			}
		}
	}
}

// with returns m with key set to value.
func with(m map[string]string, key, value string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	out[key] = value
	return out
}

// checkPlannedOutputs fails unless the plan output out creates each
// (string) output with its wanted value.
func checkPlannedOutputs(t *testing.T, out string, want map[string]string) {
	t.Helper()
	for name, value := range want {
		re := regexp.MustCompile(`\+ ` + regexp.QuoteMeta(name) + `\s+= "` + regexp.QuoteMeta(value) + `"\n`)
		if !re.MatchString(out) {
			t.Fatalf("the plan does not set output %s = %q:\n%s", name, value, out)
		}
	}
}

// checkStateOutputs fails unless the workspace's current state has each
// (string) output with its wanted value.
func checkStateOutputs(ctx context.Context, t *testing.T, c *tfe.Client, wsID string, want map[string]string) {
	t.Helper()
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, wsID)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range outs.Items {
		got[o.Name] = fmt.Sprint(o.Value)
	}
	for name, value := range want {
		if got[name] != value {
			t.Fatalf("the state's output %s is %q, want %q (all: %v)", name, got[name], value, got)
		}
	}
}

// OpenTofu 1.8 and later evaluate variables while they load the
// configuration: a module source may name one. The workspace's value wins
// there too (init installs the module it names, not the one of the
// configuration's own auto file), and the commands that make the plan's
// description load the configuration with it (the redacted plan JSON has
// its provider schemas).
const earlyConfig = `
variable "mod" { type = string }
module "m" { source = "./mods/${var.mod}" }
output "mod" { value = module.m.name }
resource "terraform_data" "r" { input = var.mod }
`

func TestEarlyEvaluatedVariables(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	ran := false
	for _, eng := range engines(t) {
		if !atLeast(t, eng, "", "1.8.0") {
			continue
		}
		ran = true
		t.Run(eng.Label(), func(t *testing.T) {
			ctx := context.Background()
			e := testenv.New(t, testenv.Options{})
			c := newEngineCLI(t, e, eng)
			testenv.NewOrg(t, e.Client, "acme")
			dir := writeConfig(t, map[string]string{
				"main.tf":         cloudBlock(e.Host, "acme", "early") + earlyConfig,
				"zzz.auto.tfvars": `mod = "fromzzz"`,
			})
			for _, m := range []string{"fromzzz", "fromws"} {
				if err := os.MkdirAll(filepath.Join(dir, "mods", m), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "mods", m, "main.tf"), []byte(fmt.Sprintf("output \"name\" { value = %q }\n", m)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c.run(dir, "init")
			ws, err := e.Client.Workspaces.Read(ctx, "acme", "early")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("mod"), Value: tfe.String("fromws"), Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
				t.Fatal(err)
			}
			c.run(dir, "apply", "-auto-approve")
			checkStateOutputs(ctx, t, e.Client, ws.ID, map[string]string{"mod": "fromws"})
			runs, err := e.Client.Runs.List(ctx, ws.ID, nil)
			if err != nil || len(runs.Items) == 0 {
				t.Fatalf("runs: %v", err)
			}
			raw, err := redactedPlanJSON(ctx, e.Client, runs.Items[0].Plan.ID)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct {
				ProviderSchemas map[string]any `json:"provider_schemas"`
			}
			if err := json.Unmarshal(raw, &doc); err != nil || len(doc.ProviderSchemas) == 0 {
				t.Fatalf("the redacted plan JSON has no provider schemas (%v):\n%.500s", err, raw)
			}
		})
	}
	if !ran {
		// As testenv.Engines: a missing engine fails under CI (the
		// engines list names OpenTofu 1.12.6), elsewhere it is skipped.
		if os.Getenv("CI") != "" {
			t.Fatal("no OpenTofu 1.8 or later among the engines (tools/engines/versions, make engines): this test needs one")
		}
		t.Skip("no OpenTofu 1.8 or later among the engines (make engines builds one)")
	}
}
