package stack

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zclconf/go-cty/cty"
)

// copyTree copies a fixture folder into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func terraform(t *testing.T, dir string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command("terraform", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TF_IN_AUTOMATION=1", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=/dev/null")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("terraform %v: %v", args, err)
	}
	return out.String(), 0
}

// writeInputs writes the deployment's inputs as the runner writes run
// variables: an HCL .auto.tfvars file.
func writeInputs(t *testing.T, dir string, vars map[string]string) {
	t.Helper()
	var b strings.Builder
	for k, v := range vars {
		b.WriteString(k + " = " + v + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "zz_inputs.auto.tfvars"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// compileFixture copies a fixture folder and compiles one deployment of it.
func compileFixture(t *testing.T, fixture, deployment string) (string, *Compiled) {
	t.Helper()
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatal("terraform is not on PATH: this test runs the generated configuration with it")
	}
	dir := t.TempDir()
	copyTree(t, fixture, dir)
	cfg, diags := ParseFS(os.DirFS(dir))
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	out, diags := cfg.Compile(deployment)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	return dir, out
}

// initAndApply writes the generated module and the inputs into dir and
// applies them with terraform.
func initAndApply(t *testing.T, dir string, out *Compiled) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, GeneratedFile), out.File, 0o644); err != nil {
		t.Fatal(err)
	}
	writeInputs(t, dir, out.Variables)
	if text, code := terraform(t, dir, "init", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("init:\n%s\n%s", text, out.File)
	}
	if text, code := terraform(t, dir, "apply", "-auto-approve", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("apply:\n%s\n%s", text, out.File)
	}
}

// TestCompileRunsWithTerraform compiles one deployment of a two-component
// stack (app reads network's output) and applies it with the real
// terraform binary: the outputs flow between the components, a second
// plan is empty, and removing a component destroys its resources.
func TestCompileRunsWithTerraform(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	dir, out := compileFixture(t, "testdata/tfdata", "staging")
	if got := out.Variables; len(got) != 2 || got["prefix"] != `"acme-staging"` || got["replicas"] != "2" {
		t.Fatalf("variables = %v", got)
	}
	initAndApply(t, dir, out)
	text, _ := terraform(t, dir, "output", "-json", "app_ids")
	var ids []string
	if err := json.Unmarshal([]byte(text), &ids); err != nil || strings.Join(ids, " ") != "acme-staging-net/app-0 acme-staging-net/app-1" {
		t.Fatalf("app_ids = %s (%v)", text, err)
	}
	if text, code := terraform(t, dir, "plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan is not empty (exit %d):\n%s", code, text)
	}

	// Remove the app component: a removed block destroys its resources.
	comp, _ := os.ReadFile(filepath.Join(dir, "components.tfcomponent.hcl"))
	s := string(comp)
	s = s[:strings.Index(s, `component "app"`)] + "removed {\n  source    = \"./modules/app\"\n  from      = component.app\n  providers = {}\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "components.tfcomponent.hcl"), []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, diags := ParseFS(os.DirFS(dir))
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	out, diags = cfg.Compile("staging")
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if err := os.WriteFile(filepath.Join(dir, GeneratedFile), out.File, 0o644); err != nil {
		t.Fatal(err)
	}
	writeInputs(t, dir, out.Variables)
	text, code := terraform(t, dir, "apply", "-auto-approve", "-input=false", "-no-color")
	if code != 0 || !strings.Contains(text, "0 added, 0 changed, 2 destroyed") {
		t.Fatalf("apply after removing app (exit %d):\n%s\n%s", code, text, out.File)
	}
}

// TestCompileProviderForEach: a provider with for_each becomes one
// aliased provider configuration per instance, and a component that picks
// its provider instance by each.key becomes one module per instance,
// each given its own; terraform applies it, every resource is managed by
// its region's provider configuration, and the component still reads as a
// map (component.site) in outputs and other components.
func TestCompileProviderForEach(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	dir, out := compileFixture(t, "testdata/regions", "global")
	for _, want := range []string{
		`alias = "region__eu-west-1"`, `alias = "region__us-east-1"`,
		`module "site__eu-west-1"`, `terraform = terraform.region__eu-west-1`, `region = "eu-west-1"`, `zones  = 2`,
		`"us-east-1" = module.site__us-east-1`,
	} {
		if !strings.Contains(string(out.File), want) {
			t.Errorf("generated file lacks %q:\n%s", want, out.File)
		}
	}
	initAndApply(t, dir, out)
	text, _ := terraform(t, dir, "output", "-json", "sites")
	var sites map[string]string
	if err := json.Unmarshal([]byte(text), &sites); err != nil || sites["us-east-1"] != "us-east-1/3" || sites["eu-west-1"] != "eu-west-1/2" || len(sites) != 2 {
		t.Fatalf("sites = %s (%v)", text, err)
	}
	state, _ := terraform(t, dir, "show", "-json")
	var st struct {
		Values struct {
			Root struct {
				Children []struct {
					Address   string
					Resources []struct {
						ProviderName string `json:"provider_name"`
						Values       map[string]any
					}
				} `json:"child_modules"`
			} `json:"root_module"`
		}
	}
	if err := json.Unmarshal([]byte(state), &st); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, m := range st.Values.Root.Children {
		for _, r := range m.Resources {
			got[m.Address] = r.Values["output"]
		}
	}
	if got["module.site__us-east-1"] != "us-east-1/3" || got["module.site__eu-west-1"] != "eu-west-1/2" || got["module.summary"] != "eu-west-1/2,us-east-1/3/2" {
		t.Errorf("resources = %v", got)
	}
	// Each instance's resources belong to its region's provider.
	raw, err := os.ReadFile(filepath.Join(dir, "terraform.tfstate"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`"module": "module.site__us-east-1"`, `"provider": "provider[\"terraform.io/builtin/terraform\"].region__us-east-1"`,
		`"provider": "provider[\"terraform.io/builtin/terraform\"].region__eu-west-1"`,
	} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("state lacks %s:\n%s", want, raw)
		}
	}
	if text, code := terraform(t, dir, "plan", "-detailed-exitcode", "-input=false", "-no-color"); code != 0 {
		t.Fatalf("second plan is not empty (exit %d):\n%s", code, text)
	}

	// Instances must be known before the plan, and picked by a key that exists.
	bad := stackFiles()
	bad["main.tfcomponent.hcl"] = append(bad["main.tfcomponent.hcl"], []byte(`
required_providers {
  terraform = { source = "terraform.io/builtin/terraform" }
}

provider "terraform" "r" {
  for_each = toset(["a"])
}

component "z" {
  source    = "./z"
  inputs    = {}
  providers = { terraform = provider.terraform.r["b"] }
}
`)...)
	cfg, diags := Parse(bad)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if _, diags := cfg.Compile("dev"); !diags.HasErrors() || !strings.Contains(diags.Err().Error(), `has no instance "b"`) {
		t.Errorf("picking a missing provider instance: %v", diags)
	}
}

func TestCompileRefusesWhatCannotRunYet(t *testing.T) {
	t.Parallel()
	files := stackFiles()
	files["main.tfdeploy.hcl"] = []byte("store \"varset\" \"creds\" {\n  id       = \"varset-1\"\n  category = \"env\"\n}\n\ndeployment \"dev\" {\n  inputs = { name = store.varset.creds.NAME }\n}\n")
	cfg, diags := Parse(files)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if _, diags := cfg.Compile("dev"); !diags.HasErrors() || diags[0].Range == nil || diags[0].Range.Start.Line != 7 {
		t.Errorf("diagnostics = %v", diags)
	}
	if _, diags := cfg.Compile("nope"); !diags.HasErrors() {
		t.Error("compiled a deployment that does not exist")
	}
}

// An input that is an identity_token's jwt is left out of the run's
// variables and named in Identity, with the token's audiences; its
// variable must be ephemeral (a token kept in a saved plan would apply
// with the plan's subject), and the jwt cannot be part of a larger value.
func TestCompileIdentityTokenInputs(t *testing.T) {
	t.Parallel()
	compile := func(ephemeral, input string) (*Compiled, Diagnostics) {
		t.Helper()
		files := map[string][]byte{
			"main.tfcomponent.hcl": []byte(`variable "name" {
  type = string
}

variable "token" {
  type      = string
  ` + ephemeral + `
}

component "a" {
  source    = "./a"
  inputs    = { name = var.name }
  providers = {}
}
`),
			"main.tfdeploy.hcl": []byte(`identity_token "aws" {
  audience = ["aws.workload.identity", "sts.example.test"]
}

locals {
  tok = identity_token.aws.jwt
}

deployment "dev" {
  inputs = { name = "dev", token = ` + input + ` }
}
`),
		}
		cfg, diags := Parse(files)
		if diags.HasErrors() {
			t.Fatal(diags.Err())
		}
		return cfg.Compile("dev")
	}
	out, diags := compile("ephemeral = true", "identity_token.aws.jwt")
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	if got := out.Identity["token"]; len(out.Identity) != 1 || got.Token != "aws" || len(got.Audience) != 2 || got.Audience[1] != "sts.example.test" {
		t.Errorf("identity inputs: %+v", out.Identity)
	}
	if _, ok := out.Variables["token"]; ok || out.Variables["name"] != `"dev"` {
		t.Errorf("variables: %v; want name only", out.Variables)
	}
	if !strings.Contains(string(out.File), "ephemeral = true") {
		t.Errorf("the generated variable is not ephemeral:\n%s", out.File)
	}
	if out, diags := compile("ephemeral = true", "local.tok"); diags.HasErrors() || out.Identity["token"].Token != "aws" {
		t.Errorf("a token through a local: %+v, %v", out, diags)
	}
	if _, diags := compile("ephemeral = true", "upper(local.tok)"); !diags.HasErrors() || !strings.Contains(diags.Err().Error(), "only as it is") {
		t.Errorf("a token changed by a function: %v", diags)
	}
	if _, diags := compile("", "identity_token.aws.jwt"); !diags.HasErrors() || !strings.Contains(diags.Err().Error(), "ephemeral = true") {
		t.Errorf("a non-ephemeral variable taking a token: %v", diags)
	}
	if _, diags := compile("ephemeral = true", `"Bearer ${identity_token.aws.jwt}"`); !diags.HasErrors() || !strings.Contains(diags.Err().Error(), "only as it is") {
		t.Errorf("a token inside an expression: %v", diags)
	}
}

func TestCompileProviderConfig(t *testing.T) {
	t.Parallel()
	files := stackFiles()
	files["main.tfcomponent.hcl"] = []byte(`required_providers {
  aws = { source = "hashicorp/aws", version = "~> 5.0" }
}

variable "name" {
  type = string
}

provider "aws" "east" {
  config {
    region = "us-east-1"
    default_tags {
      tags = { Stack = var.name }
    }
  }
}

component "a" {
  source    = "./a"
  inputs    = { name = var.name }
  providers = { aws = provider.aws.east }
}

component "b" {
  source     = "./b"
  inputs     = { upstream = component.a.out }
  providers  = { aws = provider.aws.east }
  depends_on = [component.a]
}
`)
	cfg, diags := Parse(files)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	out, diags := cfg.Compile("dev")
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	for _, want := range []string{
		"provider \"aws\" {\n  alias  = \"east\"\n  region = \"us-east-1\"\n  default_tags {\n    tags = { Stack = var.name }\n  }\n}",
		"aws = aws.east",
		"upstream   = module.a.out",
		"depends_on = [module.a]",
	} {
		if !strings.Contains(string(out.File), want) {
			t.Errorf("generated file lacks %q:\n%s", want, out.File)
		}
	}
}

// Values a store block reads are ephemeral unless read as .stable, and
// keep a sensitive variable's sensitivity: the variable an input goes to
// must be declared to match, or the deployment does not compile.
func TestCompileStoreValues(t *testing.T) {
	t.Parallel()
	compile := func(decl, input string) (*Compiled, Diagnostics) {
		t.Helper()
		files := map[string][]byte{
			"main.tfcomponent.hcl": []byte(`variable "v" {
  type = string
  ` + decl + `
}

component "a" {
  source    = "./a"
  inputs    = { name = var.v }
  providers = {}
}
`),
			"main.tfdeploy.hcl": []byte(`store "varset" "app" {
  name     = "app-settings"
  category = "terraform"
}

upstream_input "net" {
  type   = "stack"
  source = "app.terraform.io/acme/platform/net"
}

locals {
  prefix = "hello-"
}

deployment "dev" {
  inputs = { v = ` + input + ` }
}
`),
		}
		cfg, diags := Parse(files)
		if diags.HasErrors() {
			t.Fatal(diags.Err())
		}
		greeting, password := cty.StringVal("world"), cty.StringVal("hunter2").Mark(markSensitive)
		cfg.StoreValues = map[string]cty.Value{"app": cty.ObjectVal(map[string]cty.Value{
			"greeting": greeting.Mark(markEphemeral), "password": password.Mark(markEphemeral),
			"stable": cty.ObjectVal(map[string]cty.Value{"greeting": greeting, "password": password}),
		})}
		cfg.Upstream = map[string]cty.Value{"net": cty.ObjectVal(map[string]cty.Value{
			"plain": cty.StringVal("net-1"), "secret": cty.StringVal("s3cret").Mark(markSensitive)})}
		return cfg.Compile("dev")
	}
	for _, c := range []struct {
		decl, input, want, err string
	}{
		{"", "store.varset.app.stable.greeting", `"world"`, ""},
		{"", `"${local.prefix}${store.varset.app.stable.greeting}"`, `"hello-world"`, ""},
		{"ephemeral = true", "store.varset.app.greeting", `"world"`, ""},
		{"", "store.varset.app.greeting", "", "ephemeral = true"},
		{"", `upper(store.varset.app.greeting)`, "", "ephemeral = true"},
		{"", "store.varset.app.stable.password", "", "sensitive = true"},
		{"ephemeral = true", "store.varset.app.password", "", "sensitive = true"},
		{"sensitive = true", "store.varset.app.stable.password", `"hunter2"`, ""},
		{"sensitive = true\n  ephemeral = true", "store.varset.app.password", `"hunter2"`, ""},
		{"", "upstream_input.net.plain", `"net-1"`, ""},
		{"", "upstream_input.net.secret", "", "sensitive = true"},
		{"sensitive = true", "upstream_input.net.secret", `"s3cret"`, ""},
	} {
		out, diags := compile(c.decl, c.input)
		switch {
		case c.err == "" && diags.HasErrors():
			t.Errorf("%s into a variable with %q: %v", c.input, c.decl, diags.Err())
		case c.err == "" && out.Variables["v"] != c.want:
			t.Errorf("%s into a variable with %q: %q, want %q", c.input, c.decl, out.Variables["v"], c.want)
		case c.err != "" && (!diags.HasErrors() || !strings.Contains(diags.Err().Error(), c.err)):
			t.Errorf("%s into a variable with %q: %v, want an error saying %q", c.input, c.decl, diags, c.err)
		}
	}
}
