package runner_test

import (
	"bytes"
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/hashicorp/go-version"

	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestReadSavedPlan reads what the runner needs of plans every engine
// saved: the workspace each was made in (an apply job selects it again),
// for terraform 1.10 and later the ephemeral variables its apply must be
// given again, and the values of the variables the plan was made with
// (which an OpenTofu apply is given back), as JSON of the same values;
// never an ephemeral variable's.
func TestReadSavedPlan(t *testing.T) {
	t.Parallel()
	for _, eng := range testenv.Engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel()
			v, err := version.NewVersion(eng.Version)
			if err != nil {
				t.Fatal(err)
			}
			ephemeral := eng.Name == "terraform" && v.GreaterThanOrEqual(version.Must(version.NewVersion("1.10.0")))
			ephemeral = ephemeral || eng.Name == "tofu" && v.GreaterThanOrEqual(version.Must(version.NewVersion("1.11.0")))
			config := "variable \"v\" { type = string }\nresource \"terraform_data\" \"r\" { input = var.v }\n" +
				"variable \"l\" { type = list(string) }\nvariable \"o\" {}\nvariable \"n\" { type = number }\n"
			if ephemeral {
				config += "variable \"eph\" {\n  type      = string\n  ephemeral = true\n}\n"
			}
			for _, ws := range []string{"default", "app-1_x"} {
				dir := t.TempDir()
				if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o600); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "vars.tfvars"), []byte("v = \"x\"\neph = \"y\"\nl = [\"a\", \"b\"]\no = { k = 1, s = \"t\" }\nn = 1.5\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				for _, args := range [][]string{
					{"init", "-input=false", "-no-color"},
					{"plan", "-input=false", "-no-color", "-var-file=vars.tfvars", "-out=tfplan"},
				} {
					cmd := exec.CommandContext(context.Background(), eng.Path, args...)
					cmd.Dir = dir
					cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0", "TF_CLI_CONFIG_FILE=/dev/null", "TF_WORKSPACE=" + ws}
					var out bytes.Buffer
					cmd.Stdout, cmd.Stderr = &out, &out
					if err := cmd.Run(); err != nil {
						t.Fatalf("%s %s: %v\n%s", eng.Label(), args[0], err, out.String())
					}
				}
				workspace, applyTime, err := runner.SavedPlan(filepath.Join(dir, "tfplan"))
				if err != nil {
					t.Fatal(err)
				}
				if workspace != ws {
					t.Errorf("workspace %q, want %q", workspace, ws)
				}
				if eng.Name == "terraform" && (ephemeral && !slices.Equal(applyTime, []string{"eph"}) || !ephemeral && len(applyTime) != 0) {
					t.Errorf("apply-time variables %q (ephemeral variables: %v)", applyTime, ephemeral)
				}
				vars, err := runner.PlanVariables(filepath.Join(dir, "tfplan"))
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]string{"v": `"x"`, "l": `["a","b"]`, "o": `{"k":1,"s":"t"}`, "n": `1.5`}
				if !maps.Equal(vars, want) {
					t.Errorf("the plan's variables %v, want %v", vars, want)
				}
			}
		})
	}
	if _, _, err := runner.SavedPlan(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing plan file was read")
	}
}
