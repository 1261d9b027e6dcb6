package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// oldSecretConfig copies a sensitive variable into terraform_data, whose
// output attribute holds it unmarked: after the variable changes, the next
// plan prints the old value (`~ output = "old" -> (known after apply)`)
// with every engine, and its plan JSON holds it in prior_state and the
// change's before. plain_copy prints the old and the new value on one line
// of the plan (the current one masked as a sensitive variable).
const oldSecretConfig = `
variable "secret" {
  type      = string
  sensitive = true
}
resource "terraform_data" "s" { input = var.secret }
resource "terraform_data" "nested" {
  input = { list = [var.secret, "plain-neighbour"] }
}
output "o" {
  value     = var.secret
  sensitive = true
}
output "plain_copy" { value = nonsensitive(var.secret) }
`

// TestOldSecretMasked: a sensitive variable's previous value, which only
// the workspace's state still knows, appears in none of the next run's
// plan log, apply log and redacted plan JSON; the new value is masked
// too. With every engine (terraform on PATH, terraform 1.5.7, OpenTofu);
// one store, as masking happens in the runner.
func TestOldSecretMasked(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engs := engines(t)
	e := testenv.New(t, testenv.Options{})
	org := testenv.NewOrg(t, e.Client, "acme")
	for _, eng := range engs {
		t.Run(eng.Label(), func(t *testing.T) {
			// The server finds an engine by version alone (tofu 1.12.6
			// in the engines folder), as for a workspace tofu made.
			testOldSecretMasked(t, e, org.Name, "secrets-"+strings.ReplaceAll(eng.Label(), ".", "-"), eng.Version)
		})
	}
}

func testOldSecretMasked(t *testing.T, e *testenv.Env, org, name, version string) {
	ctx := context.Background()
	c := e.Client
	// Text logs: the plan's text shows the changed values (masked), its
	// JSON log lines name the changes only.
	ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name), TerraformVersion: tfe.String(version),
		StructuredRunOutputEnabled: tfe.Bool(false)})
	if err != nil {
		t.Fatal(err)
	}
	const oldSecret, newSecret = "Old-Secret-4f1c9a", "New-Secret-8d2e7b"
	v, err := c.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("secret"), Value: tfe.String(oldSecret),
		Category: tfe.Category(tfe.CategoryTerraform), Sensitive: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	cv := uploadFiles(ctx, t, c, ws.ID, map[string]string{"main.tf": oldSecretConfig}, false)
	apply := func() *tfe.Run {
		t.Helper()
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatalf("creating a run: %v", err)
		}
		r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored)
		if r.Status != tfe.RunApplied {
			t.Fatalf("run %s: %s, want applied: %s", r.ID, r.Status, strings.Join(phaseLogs(ctx, t, e, r), "\n"))
		}
		return r
	}
	apply()
	if _, err := c.Variables.Update(ctx, ws.ID, v.ID, tfe.VariableUpdateOptions{Value: tfe.String(newSecret)}); err != nil {
		t.Fatal(err)
	}
	r := apply()

	logs := phaseLogs(ctx, t, e, r)
	if len(logs) != 2 {
		t.Fatalf("run %s has %d logs, want plan and apply", r.ID, len(logs))
	}
	// The plan shows the changed attribute and output, both values masked.
	for _, want := range []string{`output = "***" -> (known after apply)`, `plain_copy = "***" -> "***"`} {
		if !strings.Contains(logs[0], want) {
			t.Errorf("the plan log lacks %s:\n%s", want, logs[0])
		}
	}
	redacted, err := redactedPlanJSON(ctx, c, r.Plan.ID)
	if err != nil {
		t.Fatalf("the redacted plan JSON: %v", err)
	}
	if !strings.Contains(string(redacted), "plain-neighbour") {
		t.Fatalf("the redacted plan JSON lost the plain values: %.500s", redacted)
	}
	for what, text := range map[string]string{"plan log": logs[0], "apply log": logs[1], "json-output-redacted": string(redacted)} {
		for _, secret := range []string{oldSecret, newSecret} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s of run %s holds %q", what, r.ID, secret)
			}
		}
	}

	// The state's sensitive output stays hidden from the outputs API.
	outs, err := c.StateVersionOutputs.ReadCurrent(ctx, ws.ID)
	if err != nil {
		t.Fatal(err)
	}
	hidden := false
	for _, o := range outs.Items {
		hidden = hidden || o.Name == "o" && o.Sensitive && o.Value == nil
	}
	if !hidden {
		t.Fatalf("current state outputs %+v: want o, sensitive, without its value", outs.Items)
	}
}
