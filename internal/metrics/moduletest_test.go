package metrics_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
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
	id := tfe.RegistryModuleID{Organization: "acme", Name: "math", Provider: "null", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	m, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String(id.Name), Provider: tfe.String(id.Provider)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RegistryModules.Update(ctx, id, tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "tests"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"main.tf":               "output \"two\" { value = 1 + 1 }\n",
		"tests/math.tftest.hcl": "run \"adds\" {\n  command = plan\n  assert {\n    condition     = output.two == 2\n    error_message = \"no\"\n  }\n}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		t.Fatal(err)
	}
	cv, err := e.Client.ConfigurationVersions.CreateForRegistryModule(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Client.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
		t.Fatal(err)
	}
	tr, err := e.Client.TestRuns.Create(ctx, tfe.TestRunCreateOptions{ConfigurationVersion: cv, RegistryModule: m})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := e.Client.TestRuns.Read(ctx, id, tr.ID)
		if err == nil && r.Status == tfe.TestRunFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test run did not finish: %+v, %v", r, err)
		}
	}

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
