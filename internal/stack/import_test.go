package stack_test

import (
	"context"
	"io"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestImportMode: a deployment with import = true runs in import mode:
// the import blocks of its components' modules are moved to the generated
// root module, its plan imports, its first apply step is an import step,
// and the state holds the imported object. A deployment without it
// ignores those blocks and creates the object.
func TestImportMode(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "import", "adopt", "")
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "testdata/import", nil)
		if err != nil {
			t.Fatal(err)
		}
		if cfg, err = c.StackConfigurations.Read(ctx, cfg.ID); err != nil || cfg.Status != "completed" {
			t.Fatalf("configuration: %v, %v: %s", cfg.Status, err, diagnostics(t, c, cfg.ID))
		}
		groups := map[string]string{"migrated": "", "fresh": ""}
		for name := range groups {
			ids := deploymentRuns(t, c, e, st.ID, name)
			if len(ids) != 1 {
				t.Fatalf("%s has runs %v", name, ids)
			}
			r := waitRun(t, c, ids[0], is("succeeded", "failed"))
			if r.Status != "succeeded" {
				t.Fatalf("%s = %s: %s", name, r.Status, diagnostics(t, c, cfg.ID))
			}
			ss := steps(t, c, r.ID)
			groups[name] = stepSummary(ss)
			rc, err := c.StackDeploymentSteps.Artifacts(ctx, ss[0].ID, tfe.StackDeploymentStepArtifactPlanDebugLog)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(rc)
			rc.Close()
			want := "Plan: 1 to add, 0 to change"
			if name == "migrated" {
				want = "Plan: 1 to import, 0 to add"
			}
			if !strings.Contains(string(b), want) {
				t.Errorf("%s's plan log lacks %q:\n%s", name, want, b)
			}
		}
		if groups["migrated"] != "plan=completed import=completed plan=completed" {
			t.Errorf("migrated steps: %s", groups["migrated"])
		}
		if groups["fresh"] != "plan=completed apply=completed plan=completed" {
			t.Errorf("fresh steps: %s", groups["fresh"])
		}
		if got := outputs(t, c, org.Name, "stack-"+st.ID+"-migrated")["box_id"]; got != "migrated-box" {
			t.Errorf("migrated box id = %v, want the imported one", got)
		}
		if got, _ := outputs(t, c, org.Name, "stack-"+st.ID+"-fresh")["box_id"].(string); got == "" || got == "migrated-box" {
			t.Errorf("fresh box id = %q, want a new one", got)
		}
	})
}
