package runner_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPlanSummaryCountsMatchShowJSON proves the counts an auto-applied
// plan is reported with (terraform's summary line, read while the plan
// streams, before show -json has run) are the ones show -json gives, for
// every engine: an update, a destruction, a replacement (one added, one
// destroyed) and two additions.
func TestPlanSummaryCountsMatchShowJSON(t *testing.T) {
	t.Parallel()
	v1 := `
resource "terraform_data" "keep" { input = "a" }
resource "terraform_data" "gone" { input = "x" }
resource "terraform_data" "swap" { triggers_replace = "1" }
`
	v2 := `
resource "terraform_data" "keep" { input = "b" }
resource "terraform_data" "swap" { triggers_replace = "2" }
resource "terraform_data" "new" {
  count = 2
  input = "n"
}
`
	for _, eng := range testenv.Engines(t) {
		t.Run(eng.Label(), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tf := func(stdout *bytes.Buffer, args ...string) int {
				t.Helper()
				cmd := exec.CommandContext(context.Background(), eng.Path, args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "CHECKPOINT_DISABLE=1", "TF_IN_AUTOMATION=1", "TF_INPUT=0"}
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = stdout, &stderr
				err := cmd.Run()
				if ee, ok := err.(*exec.ExitError); ok {
					return ee.ExitCode()
				} else if err != nil {
					t.Fatalf("%s %v: %v", eng.Label(), args, err)
				}
				return 0
			}
			write := func(text string) {
				if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			write(v1)
			var out bytes.Buffer
			if tf(&out, "init", "-input=false", "-no-color") != 0 || tf(&out, "apply", "-input=false", "-no-color", "-auto-approve") != 0 {
				t.Fatalf("setting up the state:\n%s", out.String())
			}
			write(v2)
			// Text, and terraform's JSON log lines (structured run output).
			for _, mode := range []struct {
				flag   string
				counts func([]byte) (int, int, int, int)
			}{{"-no-color", runner.SummaryCounts}, {"-json", runner.StructuredSummaryCounts}} {
				out.Reset()
				if code := tf(&out, "plan", "-input=false", mode.flag, "-detailed-exitcode", "-out=tfplan"); code != 2 {
					t.Fatalf("plan %s exit code %d, want 2 (changes):\n%s", mode.flag, code, out.String())
				}
				add, change, destroy, imports := mode.counts(out.Bytes())
				var js bytes.Buffer
				if tf(&js, "show", "-json", "-no-color", "tfplan") != 0 {
					t.Fatal("show -json failed")
				}
				wa, wc, wd, wi := runner.CountChanges(js.Bytes())
				if [4]int{add, change, destroy, imports} != [4]int{wa, wc, wd, wi} || [4]int{wa, wc, wd, wi} != [4]int{3, 1, 2, 0} {
					t.Fatalf("plan %s: summary counts %d/%d/%d/%d (add/change/destroy/import), show -json %d/%d/%d/%d, want 3/1/2/0:\n%s",
						mode.flag, add, change, destroy, imports, wa, wc, wd, wi, out.String())
				}
			}
		})
	}
}

// TestPlanSummaryLines reads the summary line's forms: imports first,
// OpenTofu's "to forget", a line split across writes, and output that has
// none (outputs only, no changes) or only quotes one in an attribute.
func TestPlanSummaryLines(t *testing.T) {
	t.Parallel()
	for out, want := range map[string][4]int{
		"Plan: 1 to import, 2 to add, 0 to change, 1 to destroy.\n":                             {2, 0, 1, 1},
		"  + x = \"Plan: 9 to add\"\nPlan: 0 to add, 3 to change, 0 to destroy, 1 to forget.\n": {0, 3, 0, 0},
		"Changes to Outputs:\n  + o = 1\n":                                                      {0, 0, 0, 0},
		"No changes. Your infrastructure matches the configuration.\n":                          {0, 0, 0, 0},
	} {
		a, c, d, i := runner.SummaryCounts([]byte(out))
		if got := [4]int{a, c, d, i}; got != want {
			t.Errorf("%q: %v, want %v", out, got, want)
		}
	}
}

// TestMaskJSONLogLines: a secret is masked in terraform's JSON log lines
// (structured run output), where quotes, backslashes, control characters
// and <, > and & are escaped.
func TestMaskJSONLogLines(t *testing.T) {
	t.Parallel()
	for _, secret := range []string{`pa"ss\word-1`, "a<b>&c-secret", "tab\there-secret"} {
		line, err := json.Marshal(map[string]string{"@message": "value is " + secret})
		if err != nil {
			t.Fatal(err)
		}
		got := runner.MaskLog([]string{secret}, string(line)+"\n")
		var back map[string]string
		if err := json.Unmarshal([]byte(got), &back); err != nil || back["@message"] != "value is ***" {
			t.Errorf("secret %q: masked line %s (%v), want @message %q", secret, got, err, "value is ***")
		}
	}
}
