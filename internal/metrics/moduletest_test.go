package metrics_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestModuleTestMetrics: a module test run (real terraform test) shows in
// terrace_module_test_runs by status, every status a series from the
// start, and its duration in terrace_module_test_run_duration_seconds by
// how it ended.
func TestModuleTestMetrics(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	fams := scrape(t, e)
	for _, st := range []string{"queued", "running", "finished", "errored", "canceled"} {
		if got := value(fams, "terrace_module_test_runs", map[string]string{"status": st}); got != 0 {
			t.Errorf("terrace_module_test_runs{status=%q} on a fresh server = %v, want 0", st, got)
		}
	}

	testenv.NewOrg(t, e.Client, "acme")
	id := testenv.EnableModuleTests(ctx, t, e.Client, "acme", "math", "null")
	tr := testenv.StartTestRun(ctx, t, e.Client, id, map[string]string{
		"main.tf":               "output \"two\" { value = 1 + 1 }\n",
		"tests/math.tftest.hcl": "run \"adds\" {\n  command = plan\n  assert {\n    condition     = output.two == 2\n    error_message = \"no\"\n  }\n}\n",
	})
	testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID, tfe.TestRunFinished)

	fams = scrape(t, e)
	for st, want := range map[string]float64{"queued": 0, "running": 0, "finished": 1, "errored": 0, "canceled": 0} {
		if got := value(fams, "terrace_module_test_runs", map[string]string{"status": st}); got != want {
			t.Errorf("terrace_module_test_runs{status=%q} = %v, want %v", st, got, want)
		}
	}
	if s, ok := sample(fams, "terrace_module_test_run_duration_seconds", map[string]string{"outcome": "finished"}); !ok ||
		s.GetHistogram().GetSampleCount() != 1 || s.GetHistogram().GetSampleSum() <= 0 {
		t.Errorf("the test run's duration: %v (want one sample of more than 0s, outcome finished)", s)
	}
	if got := value(fams, "terrace_metrics_store_errors_total", nil); got != 0 {
		t.Errorf("terrace_metrics_store_errors_total = %v", got)
	}
}
