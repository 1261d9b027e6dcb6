package stack

import (
	"os"
	"strings"
	"testing"
)

func TestParseTwoTier(t *testing.T) {
	t.Parallel()
	cfg, diags := ParseFS(os.DirFS("testdata/twotier"))
	if diags.HasErrors() {
		t.Fatalf("diagnostics: %v", diags.Err())
	}
	if len(cfg.Components) != 2 || cfg.Components[0].Name != "network" || cfg.Components[1].Name != "app" {
		t.Fatalf("components = %+v", cfg.Components)
	}
	app := cfg.Component("app")
	if app.Source != "./modules/app" || len(app.Needs) != 1 || app.Needs[0] != "network" {
		t.Errorf("app = source %q needs %v", app.Source, app.Needs)
	}
	if len(app.Providers) != 1 || app.Providers[0].LocalName != "random" || app.Providers[0].Type != "random" || app.Providers[0].Alias != "this" {
		t.Errorf("app providers = %+v", app.Providers)
	}
	if rp := cfg.RequiredProviders["random"]; rp == nil || rp.Source != "hashicorp/random" || rp.Version != "~> 3.6" {
		t.Errorf("required_providers = %+v", cfg.RequiredProviders)
	}
	if v := cfg.Variables[1]; v.Name != "replicas" || !v.HasDefault || v.Default.AsBigFloat().String() != "1" {
		t.Errorf("replicas = %+v", v)
	}
	var names []string
	for _, d := range cfg.Deployments {
		names = append(names, d.Name+"@"+d.Group)
	}
	if got := strings.Join(names, " "); got != "dev@dev_default staging@canary prod@prod_default" {
		t.Errorf("deployments = %s", got)
	}
	if g := cfg.Group("dev_default"); g == nil || !g.Implicit {
		t.Errorf("dev has no implicit group: %+v", g)
	}
	if g := cfg.Group("canary"); g == nil || len(g.AutoApproveChecks) != 1 || g.AutoApproveChecks[0] != "no_destroy" {
		t.Errorf("canary = %+v", g)
	}
	if len(cfg.PublishOutputs) != 1 || cfg.PublishOutputs[0].Name != "app_id" {
		t.Errorf("publish_output = %+v", cfg.PublishOutputs)
	}
}

// stackFiles is a minimal valid stack; tests change one file at a time.
func stackFiles() map[string][]byte {
	return map[string][]byte{
		"main.tfcomponent.hcl": []byte(`variable "name" {
  type = string
}

component "a" {
  source    = "./a"
  inputs    = { name = var.name }
  providers = {}
}
`),
		"main.tfdeploy.hcl": []byte(`deployment "dev" {
  inputs = { name = "dev" }
}
`),
	}
}

func TestParseMinimal(t *testing.T) {
	t.Parallel()
	_, diags := Parse(stackFiles())
	if len(diags) != 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
}

// TestParseErrors checks that each malformed configuration gives an error
// naming the file and line of the problem, with a snippet of it.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, file, src string
		line            int
		summary         string
	}{
		{"unknown block", "main.tfcomponent.hcl", "resource \"x\" \"y\" {}\n" + string(stackFiles()["main.tfcomponent.hcl"]), 1, "Unsupported block type"},
		{"variable without type", "main.tfcomponent.hcl", "variable \"name\" {\n  default = \"x\"\n}\n\ncomponent \"a\" {\n  source = \"./a\"\n  inputs = { name = var.name }\n  providers = {}\n}\n", 1, "Missing variable type"},
		{"component cycle", "main.tfcomponent.hcl", `component "a" {
  source    = "./a"
  inputs    = { x = component.b.out }
  providers = {}
}

component "b" {
  source    = "./b"
  inputs    = { x = component.a.out }
  providers = {}
}
`, 1, "Component cycle"},
		{"undefined provider", "main.tfcomponent.hcl", `required_providers {
  aws = { source = "hashicorp/aws", version = "~> 5.0" }
}

component "a" {
  source    = "./a"
  inputs    = {}
  providers = {
    aws = provider.aws.east
  }
}
`, 9, "Undefined provider"},
		{"provider not required", "main.tfcomponent.hcl", `provider "aws" "east" {
  config {}
}

component "a" {
  source    = "./a"
  inputs    = {}
  providers = { aws = provider.aws.east }
}
`, 1, "Provider not required"},
		{"provider argument outside config", "main.tfcomponent.hcl", `provider "aws" "east" {
  region = "us-east-1"
}
`, 2, "Unsupported argument"},
		{"syntax error", "main.tfcomponent.hcl", "component \"a\" {\n  source = \n}\n", 2, ""},
		{"undeclared variable", "main.tfcomponent.hcl", `component "a" {
  source    = "./a"
  inputs    = { name = var.nope }
  providers = {}
}
`, 3, "Undeclared variable"},
		{"missing source", "main.tfcomponent.hcl", "component \"a\" {\n  inputs = {}\n  providers = {}\n}\n", 1, "Missing required argument"},
		{"unknown deployment input", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = {\n    name = \"x\"\n    colour = \"red\"\n  }\n}\n", 4, "Undeclared variable"},
		{"missing deployment input", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = {}\n}\n", 1, "Missing input"},
		{"undeclared group", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = { name = \"x\" }\n  deployment_group = deployment_group.nope\n}\n", 1, "Undeclared deployment group"},
		{"two deployments in a group", "main.tfdeploy.hcl", "deployment_group \"g\" {}\ndeployment \"a\" {\n  inputs = { name = \"x\" }\n  deployment_group = deployment_group.g\n}\ndeployment \"b\" {\n  inputs = { name = \"y\" }\n  deployment_group = deployment_group.g\n}\n", 1, "Too many deployments in a group"},
		{"auto approve without checks", "main.tfdeploy.hcl", "deployment_auto_approve \"x\" {}\ndeployment \"dev\" {\n  inputs = { name = \"x\" }\n}\n", 1, "Missing check"},
		{"beta orchestrate block", "main.tfdeploy.hcl", "orchestrate \"auto_approve\" \"no_destroy\" {\n  check {\n    condition = true\n    reason = \"x\"\n  }\n}\ndeployment \"dev\" {\n  inputs = { name = \"x\" }\n}\n", 1, "Unsupported block type"},
		{"duplicate deployment", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = { name = \"x\" }\n}\n\ndeployment \"dev\" {\n  inputs = { name = \"y\" }\n}\n", 5, "Duplicate deployment"},
		{"store with id and name", "main.tfdeploy.hcl", "store \"varset\" \"creds\" {\n  id = \"varset-1\"\n  name = \"x\"\n  category = \"env\"\n}\ndeployment \"dev\" {\n  inputs = { name = \"x\" }\n}\n", 1, "Invalid varset store"},
		{"undeclared identity token", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = { name = identity_token.aws.jwt }\n}\n", 2, "Undeclared identity token"},
		{"bad destroy", "main.tfdeploy.hcl", "deployment \"dev\" {\n  inputs = { name = \"x\" }\n  destroy = \"yes\"\n}\n", 3, "Invalid value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			files := stackFiles()
			files[tc.file] = []byte(tc.src)
			_, diags := Parse(files)
			if !diags.HasErrors() {
				t.Fatalf("no error; diagnostics: %v", diags)
			}
			var found bool
			for _, d := range diags {
				if d.Severity != SeverityError || (tc.summary != "" && d.Summary != tc.summary) {
					continue
				}
				if d.Range == nil || d.Range.Filename != tc.file || d.Range.Start.Line != tc.line {
					continue
				}
				if d.Snippet == nil || d.Snippet.StartLine != tc.line || d.Snippet.Code == "" {
					t.Errorf("diagnostic without a snippet: %+v", d)
				}
				found = true
			}
			if !found {
				t.Errorf("want %q at %s:%d; got:\n%v", tc.summary, tc.file, tc.line, diags.Err())
			}
		})
	}
}

func TestParseFileRules(t *testing.T) {
	t.Parallel()
	t.Run("beta suffix", func(t *testing.T) {
		files := stackFiles()
		files["old.tfstack.hcl"] = []byte(`component "x" {}`)
		_, diags := Parse(files)
		if !diags.HasErrors() || !strings.Contains(diags.Err().Error(), "old.tfstack.hcl") {
			t.Errorf("diags = %v", diags)
		}
	})
	t.Run("no deployments", func(t *testing.T) {
		files := stackFiles()
		delete(files, "main.tfdeploy.hcl")
		_, diags := Parse(files)
		if !diags.HasErrors() || diags[0].Summary != "No deployments" {
			t.Errorf("diags = %v", diags)
		}
	})
	t.Run("too many deployments", func(t *testing.T) {
		files := stackFiles()
		var b strings.Builder
		for i := 0; i <= MaxDeployments; i++ {
			b.WriteString("deployment \"d" + strings.Repeat("x", i) + "\" {\n  inputs = { name = \"x\" }\n}\n")
		}
		files["main.tfdeploy.hcl"] = []byte(b.String())
		_, diags := Parse(files)
		if !diags.HasErrors() || diags[0].Summary != "Too many deployments" {
			t.Errorf("diags = %v", diags)
		}
	})
	t.Run("too large", func(t *testing.T) {
		files := stackFiles()
		files["big.tfcomponent.hcl"] = make([]byte, MaxFileSize+1)
		_, diags := Parse(files)
		if !diags.HasErrors() || diags[0].Summary != "Configuration file too large" {
			t.Errorf("diags = %v", diags)
		}
	})
	t.Run("module files ignored", func(t *testing.T) {
		if IsConfigFile("modules/a/x.tfcomponent.hcl") || !IsConfigFile("x.tfdeploy.hcl") || IsConfigFile("main.tf") {
			t.Error("IsConfigFile")
		}
	})
}

func TestAutoApprove(t *testing.T) {
	t.Parallel()
	cfg, diags := ParseFS(os.DirFS("testdata/twotier"))
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	cases := []struct {
		name, group string
		pc          PlanContext
		approved    bool
		rule        string
	}{
		{"empty plan in a default group", "prod_default", PlanContext{Success: true, Deployment: "prod"}, true, EmptyPlanRule},
		{"changes in a default group", "prod_default", PlanContext{Success: true, Deployment: "prod", Changes: ChangeCounts{Add: 1, Total: 1}}, false, ""},
		{"adds pass no_destroy", "canary", PlanContext{Success: true, Deployment: "staging", Changes: ChangeCounts{Add: 2, Total: 2}}, true, "canary"},
		{"removes fail no_destroy", "canary", PlanContext{Success: true, Deployment: "staging", Changes: ChangeCounts{Remove: 1, Total: 1}}, false, ""},
		{"failed empty plan", "prod_default", PlanContext{Success: false, Deployment: "prod"}, false, ""},
	}
	for _, tc := range cases {
		a, d := cfg.AutoApprove(tc.group, tc.pc)
		if len(d) != 0 {
			t.Errorf("%s: diagnostics %v", tc.name, d)
		}
		if a.Approved != tc.approved || a.Rule != tc.rule {
			t.Errorf("%s: approval = %+v", tc.name, a)
		}
		if !a.Approved && tc.group == "canary" && (len(a.Failed) != 1 || a.Failed[0] != "Plan destroys 1 resources.") {
			t.Errorf("%s: failed = %q", tc.name, a.Failed)
		}
	}
}

func TestAutoApproveDeploymentAndErrors(t *testing.T) {
	t.Parallel()
	files := stackFiles()
	files["main.tfdeploy.hcl"] = []byte(`deployment_auto_approve "only_dev" {
  check {
    condition = context.plan.deployment == deployment.dev
    reason    = "only dev is auto-approved"
  }
  check {
    condition = context.plan.changes.total
    reason    = "not a bool"
  }
}

deployment_group "g" {
  auto_approve_checks = [deployment_auto_approve.only_dev]
}

deployment "dev" {
  inputs           = { name = "dev" }
  deployment_group = deployment_group.g
}
`)
	cfg, diags := Parse(files)
	if diags.HasErrors() {
		t.Fatal(diags.Err())
	}
	a, d := cfg.AutoApprove("g", PlanContext{Success: true, Deployment: "dev", Changes: ChangeCounts{Add: 1, Total: 1}})
	if a.Approved || len(a.Failed) != 1 || a.Failed[0] != "not a bool" {
		t.Errorf("approval = %+v", a)
	}
	if !d.HasErrors() || d[0].Range == nil || d[0].Range.Start.Line != 7 || d[0].Snippet == nil {
		t.Errorf("diagnostics = %+v", d)
	}
}
