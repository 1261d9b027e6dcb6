package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// Importing with the CLI against a workspace that runs remotely: config-
// driven import blocks, and `plan -generate-config-out`, whose file the
// CLI writes from the plan's JSON.

func TestTerraformImportBlocks(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	const org = "acme"
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	for _, eng := range engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel() // see parallel in TestMain
			testImportBlocks(t, e, newEngineCLI(t, e, eng), "imp-"+strings.ReplaceAll(eng.Label(), ".", "-"))
		})
	}
}

func testImportBlocks(t *testing.T, e *testenv.Env, c *cli, wsName string) {
	ctx := context.Background()
	const importBlock = `
import {
  to = terraform_data.db
  id = "db-1"
}
`
	dir := writeConfig(t, map[string]string{"main.tf": cloudBlock(e.Host, "acme", wsName) + importBlock})
	c.run(dir, "init")

	// The resource has no configuration: HCP Terraform generates it in the
	// remote plan (the run's allow-config-generation) and the CLI writes
	// it from the plan's JSON (the plan's generated-configuration).
	out := c.run(dir, "plan", "-generate-config-out=generated.tf")
	gen, err := os.ReadFile(filepath.Join(dir, "generated.tf"))
	if err != nil {
		t.Fatalf("plan -generate-config-out wrote no file: %v\n%s", err, out)
	}
	if !strings.Contains(string(gen), `resource "terraform_data" "db"`) {
		t.Fatalf("generated.tf lacks terraform_data.db:\n%s", gen)
	}
	if !strings.Contains(out, "1 to import") {
		t.Fatalf("the plan does not import terraform_data.db:\n%s", out)
	}
	ws, err := e.Client.Workspaces.Read(ctx, "acme", wsName)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := e.Client.Runs.List(ctx, ws.ID, &tfe.RunListOptions{Include: []tfe.RunIncludeOpt{tfe.RunPlan}})
	if err != nil || len(runs.Items) == 0 {
		t.Fatalf("listing runs: %v (%d)", err, len(runs.Items))
	}
	if r := runs.Items[0]; !(r.AllowConfigGeneration != nil && *r.AllowConfigGeneration) || !r.Plan.GeneratedConfiguration || r.Plan.ResourceImports != 1 {
		t.Fatalf("run %s: allow-config-generation %v, plan generated-configuration %v, imports %d; want true, true, 1",
			r.ID, (r.AllowConfigGeneration != nil && *r.AllowConfigGeneration), r.Plan.GeneratedConfiguration, r.Plan.ResourceImports)
	}

	// A plan that fails after generating configuration still gives it to
	// the CLI (terraform saves the errored plan and the file, as it does
	// locally), so that the user can fix and keep it.
	if err := os.Remove(filepath.Join(dir, "generated.tf")); err != nil {
		t.Fatal(err)
	}
	failing := filepath.Join(dir, "failing.tf")
	if err := os.WriteFile(failing, []byte(failingPrecondition), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := c.try(dir, "plan", "-generate-config-out=generated.tf")
	if err == nil || !strings.Contains(errOut+out, "precondition says no") {
		t.Fatalf("the plan with a failing precondition: err %v\nstdout:\n%s\nstderr:\n%s", err, out, errOut)
	}
	if gen, err := os.ReadFile(filepath.Join(dir, "generated.tf")); err != nil || !strings.Contains(string(gen), `resource "terraform_data" "db"`) {
		t.Fatalf("the errored plan left no generated configuration (%v):\n%s\nstdout:\n%s\nstderr:\n%s", err, gen, out, errOut)
	}
	if err := os.Remove(failing); err != nil {
		t.Fatal(err)
	}

	// With the generated configuration in place, a remote apply imports.
	out = c.run(dir, "apply", "-auto-approve")
	if !strings.Contains(out, "1 imported") {
		t.Fatalf("apply did not import:\n%s", out)
	}
	if list := c.run(dir, "state", "list"); !strings.Contains(list, "terraform_data.db") {
		t.Fatalf("state list after the import apply:\n%s", list)
	}
}

// failingPrecondition fails every plan, after the import blocks' configuration
// was generated.
const failingPrecondition = `
resource "terraform_data" "q" { input = "q" }
resource "terraform_data" "p" {
  input = "p"
  lifecycle {
    precondition {
      condition     = terraform_data.q.input == "nope"
      error_message = "precondition says no"
    }
  }
}
`
