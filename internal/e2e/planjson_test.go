package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// An auto-applied run's plan JSON is made after the apply was reported,
// by the same job. A reader that asks for it as soon as the plan ends (as
// terraform's cloud backend does with structured run output) waits and
// gets the redacted JSON, not an empty answer, and by then the run is
// applied and the workspace unlocked: the run reported its outcome before
// its plan JSON existed. After that both JSONs are served, the sensitive
// value left out of the redacted one, and the plan's counts (reported
// from terraform's summary line) are right.
const planJSONConfig = `
variable "secret" {
  type      = string
  sensitive = true
}
resource "terraform_data" "s" {
  input = var.secret
}
resource "terraform_data" "slow" {
  input = "x"
  provisioner "local-exec" {
    command = "sleep 1"
  }
}
`

func TestAutoApplyPlanJSONMadeAfterApply(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	testenv.ForEachStore(t, testAutoApplyPlanJSONMadeAfterApply)
}

func testAutoApplyPlanJSONMadeAfterApply(t *testing.T, e *testenv.Env) {
	ctx := context.Background()
	c := e.Client
	const secret = "Pl4n-JSON-s3cret"
	ws := workspaceWithSecret(ctx, t, c, "planjson", secret)
	cv := uploadFiles(ctx, t, c, ws.ID, map[string]string{"main.tf": planJSONConfig}, false)
	r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	redacted := func() []byte {
		t.Helper()
		b, err := redactedPlanJSON(ctx, c, r.Plan.ID)
		if err != nil {
			t.Fatalf("the redacted plan JSON: %v", err)
		}
		return b
	}
	check := func(when string, b []byte) {
		t.Helper()
		var doc struct {
			ResourceChanges []struct {
				Address string `json:"address"`
			} `json:"resource_changes"`
			ProviderSchemas map[string]json.RawMessage `json:"provider_schemas"`
		}
		if err := json.Unmarshal(b, &doc); err != nil || len(doc.ResourceChanges) != 2 || len(doc.ProviderSchemas) == 0 {
			t.Fatalf("the redacted plan JSON %s (%v): %.300s", when, err, b)
		}
		if strings.Contains(string(b), secret) {
			t.Fatalf("the redacted plan JSON %s holds the sensitive value", when)
		}
	}

	// As soon as the plan has ended, as terraform's cloud backend reads it:
	// the apply (with its one-second provisioner) is still under way, and
	// the read waits for JSON that is made once the run is applied.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		cur, err := c.Runs.Read(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status == tfe.RunApplyQueued || cur.Status == tfe.RunApplying {
			check("read when the run was "+string(cur.Status), redacted())
			after, err := c.Runs.Read(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			w, err := c.Workspaces.ReadByID(ctx, ws.ID)
			if err != nil {
				t.Fatal(err)
			}
			if after.Status != tfe.RunApplied || w.Locked {
				t.Fatalf("a read of the plan JSON that started while the run was %s answered while the run was %s (workspace locked: %v): want applied and unlocked, the JSON made after the apply was reported",
					cur.Status, after.Status, w.Locked)
			}
			break
		}
		if cur.Status == tfe.RunApplied {
			t.Fatalf("the run was applied before the test saw it apply (the apply has a one-second provisioner): cannot check the order")
		}
		if cur.Status == tfe.RunErrored || time.Now().After(deadline) {
			t.Fatalf("the run did not get past its plan: %s", cur.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}

	r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplied)
	if sr, err := e.Server.Runs.System(ctx, r.ID); err != nil || sr.FromCLI {
		t.Fatalf("a run made with go-tfe is marked as made by terraform's cloud backend (%v)", err)
	}
	check("after the run applied", redacted())
	raw, err := c.Plans.ReadJSONOutput(ctx, r.Plan.ID)
	if err != nil || !json.Valid(raw) || !strings.Contains(string(raw), `"terraform_data.slow"`) {
		t.Fatalf("the plan JSON after the run applied (%v): %.300s", err, raw)
	}
	p, err := c.Plans.Read(ctx, r.Plan.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !p.HasChanges || p.ResourceAdditions != 2 || p.ResourceChanges != 0 || p.ResourceDestructions != 0 {
		t.Fatalf("plan: has changes %v, %d added, %d changed, %d destroyed; want true, 2, 0, 0", p.HasChanges, p.ResourceAdditions, p.ResourceChanges, p.ResourceDestructions)
	}
}
