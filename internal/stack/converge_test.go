package stack_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestConvergesInTwoCycles runs a deployment whose first apply changes
// what the next plan sees (testdata/twocycle: the first apply creates a
// marker file that a resource's input reads), so the re-plan after the
// first apply has changes and the one after the second is empty: the run
// shows exactly two plan/apply cycles and succeeds.
func TestConvergesInTwoCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, _, st := newStack(t, e, "twocycle", "marker", "")
		dir := copyDir(t, "testdata/twocycle")
		marker := filepath.Join(t.TempDir(), "marker")
		rewrite(t, filepath.Join(dir, "main.tfdeploy.hcl"), `"MARKER"`, `"`+marker+`"`)
		cfg, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := waitRun(t, c, groupRun(t, c, cfg.ID, "auto").ID, is("succeeded", "failed"))
		if r.Status != "succeeded" {
			t.Fatalf("run ended %s: %s", r.Status, diagnostics(t, c, cfg.ID))
		}
		if got := stepSummary(steps(t, c, r.ID)); got != "plan=completed apply=completed plan=completed apply=completed plan=completed" {
			t.Errorf("steps = %s, want two plan/apply cycles and an empty plan", got)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the first apply did not write the marker: %v", err)
		}
		if seen := outputs(t, c, org.Name, "stack-"+st.ID+"-only")["seen"]; seen != true {
			t.Errorf("output seen = %v, want true (the second apply saw the marker)", seen)
		}
	})
}
