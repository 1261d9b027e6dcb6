package stack_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestVarsetStore: a store "varset" block reads the variables of its
// category from a variable set applied to the stack's project: a value
// read as .stable reaches the state, an ephemeral and sensitive one
// reaches the apply (its provisioner hands it to the test) but no run
// shows it. A set that is neither global nor applied to the project fails
// the deployment run with a diagnostic naming the store.
func TestVarsetStore(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	const secret = "correct-horse-battery"
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, prj, st := newStack(t, e, "stores", "app", "")
		vs, err := c.VariableSets.Create(ctx, org.Name, &tfe.VariableSetCreateOptions{Name: tfe.String("app-settings"), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []tfe.VariableSetVariableCreateOptions{
			{Key: tfe.String("greeting"), Value: tfe.String("hello"), Category: tfe.Category(tfe.CategoryTerraform)},
			{Key: tfe.String("password"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryTerraform), Sensitive: tfe.Bool(true)},
			{Key: tfe.String("greeting"), Value: tfe.String("from the environment"), Category: tfe.Category(tfe.CategoryEnv)},
		} {
			if _, err := c.VariableSetVariables.Create(ctx, vs.ID, &v); err != nil {
				t.Fatal(err)
			}
		}
		out, dir := t.TempDir(), t.TempDir()
		files := map[string]string{
			"main.tfcomponent.hcl": `variable "greeting" {
  type = string
}

variable "password" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "out" {
  type = string
}

component "box" {
  source    = "./modules/box"
  inputs    = { greeting = var.greeting, password = var.password, out = var.out }
  providers = {}
}

output "greeting" {
  type  = string
  value = component.box.greeting
}
`,
			"main.tfdeploy.hcl": fmt.Sprintf(`store "varset" "app" {
  name     = "app-settings"
  category = "terraform"
}

deployment "prod" {
  inputs = {
    greeting = "${store.varset.app.stable.greeting}, world"
    password = store.varset.app.password
    out      = %q
  }
}
`, out),
			"modules/box/main.tf": `variable "greeting" {
  type = string
}

variable "password" {
  type      = string
  sensitive = true
  ephemeral = true
}

variable "out" {
  type = string
}

resource "terraform_data" "box" {
  input = var.greeting
  provisioner "local-exec" {
    command = "printf %s '${var.password}' > ${var.out}/password"
  }
}

output "greeting" {
  value = terraform_data.box.output
}
`,
		}

		// Not applied to the stack's project yet.
		cfg := uploadFiles(t, c, st.ID, dir, files)
		r := waitRun(t, c, groupRun(t, c, cfg.ID, "prod_default").ID, is("pre-deploying-pending-operator", "failed", "succeeded"))
		if d := diagnostics(t, c, cfg.ID); r.Status != "failed" || !strings.Contains(d, "neither global nor applied to the stack's project") || !strings.Contains(d, `store "app"`) {
			t.Fatalf("a set not applied to the project: run %s, diagnostics %s", r.Status, d)
		}

		if err := c.VariableSets.ApplyToProjects(ctx, vs.ID, tfe.VariableSetApplyToProjectsOptions{Projects: []*tfe.Project{prj}}); err != nil {
			t.Fatal(err)
		}
		deployApproved(t, c, st.ID, dir, files, "prod")
		if b, err := os.ReadFile(filepath.Join(out, "password")); err != nil || string(b) != secret {
			t.Errorf("the apply's password: %q, %v", b, err)
		}
		ws, err := c.Workspaces.Read(ctx, org.Name, "stack-"+st.ID+"-prod")
		if err != nil {
			t.Fatal(err)
		}
		outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs.Items) != 1 || outs.Items[0].Name != "greeting" || outs.Items[0].Value != "hello, world" {
			t.Errorf("the deployment's outputs: %+v", outs.Items)
		}
		for _, run := range workspaceRuns(t, c, org.Name, ws.Name) {
			for _, v := range run.Variables {
				if v.Key == "password" && v.Value != "" {
					t.Errorf("run %s shows the password: %q", run.ID, v.Value)
				}
			}
			full, err := c.Runs.ReadWithOptions(ctx, run.ID, &tfe.RunReadOptions{Include: []tfe.RunIncludeOpt{tfe.RunPlan, tfe.RunApply}})
			if err != nil {
				t.Fatal(err)
			}
			logs := []func() (string, error){func() (string, error) { return readAll(c.Plans.Logs(ctx, full.Plan.ID)) }}
			if full.Status == tfe.RunApplied {
				// (go-tfe waits for the end of a log: only an apply that
				// ran has one.)
				logs = append(logs, func() (string, error) { return readAll(c.Applies.Logs(ctx, full.Apply.ID)) })
			}
			for _, read := range logs {
				log, err := read()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(log, secret) {
					t.Errorf("a log of run %s shows the password:\n%s", run.ID, log)
				}
			}
		}
	})
}

func readAll(rd io.Reader, err error) (string, error) {
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(rd)
	return string(b), err
}
