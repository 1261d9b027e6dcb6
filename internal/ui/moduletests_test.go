package ui_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRegistryShowsModuleTests: the registry page tells, for each module,
// whether its tests are off, enabled without a run yet, or how its newest
// test run (real terraform test) ended.
func TestRegistryShowsModuleTests(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ids := map[string]tfe.RegistryModuleID{}
	for _, name := range []string{"fresh", "plain", "tested"} {
		if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String(name), Provider: tfe.String("null")}); err != nil {
			t.Fatal(err)
		}
		ids[name] = tfe.RegistryModuleID{Organization: "acme", Name: name, Provider: "null", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
		if name != "plain" {
			if _, err := e.Client.RegistryModules.Update(ctx, ids[name], tfe.RegistryModuleUpdateOptions{TestConfig: &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Two runs: the older fails, the newer (the one shown) passes.
	for _, want := range []string{"3", "2"} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "tests"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{
			"main.tf":               "output \"two\" { value = 1 + 1 }\n",
			"tests/math.tftest.hcl": "run \"adds\" {\n  command = plan\n  assert {\n    condition     = output.two == " + want + "\n    error_message = \"no\"\n  }\n}\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		archive, err := slug.Pack(dir)
		if err != nil {
			t.Fatal(err)
		}
		cv, err := e.Client.ConfigurationVersions.CreateForRegistryModule(ctx, ids["tested"])
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Client.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
			t.Fatal(err)
		}
		m, err := e.Client.RegistryModules.Read(ctx, ids["tested"])
		if err != nil {
			t.Fatal(err)
		}
		tr, err := e.Client.TestRuns.Create(ctx, tfe.TestRunCreateOptions{ConfigurationVersion: cv, RegistryModule: m})
		if err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
			r, err := e.Client.TestRuns.Read(ctx, ids["tested"], tr.ID)
			if err == nil && r.Status == tfe.TestRunFinished {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the test run did not finish: %+v, %v", r, err)
			}
		}
	}

	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/registry")
	got := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#modules td.tests')).map(function(td){return td.textContent.trim()})`))
	want := []string{"enabled, no run yet", "off", "finished pass: 1 passed, 0 failed"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Fatalf("the Tests column: %q, want %q", got, want)
	}

	// The newest run's status leads to the module's runs, newest first,
	// and each run to its log: terraform test's messages, the failure's
	// detail among them.
	tb.press(`#modules td.tests a`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#test-runs`)))
	verdicts := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#test-runs td.verdict')).map(function(td){return td.textContent.trim()})`))
	if strings.Join(verdicts, " | ") != "pass: 1 passed, 0 failed | fail: 0 passed, 1 failed" {
		t.Fatalf("the module's test runs: %q", verdicts)
	}
	tb.press(`#test-runs tbody tr:nth-child(2) a`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#test-log`)))
	if log := tb.text("#test-log"); !strings.Contains(log, `"adds"... fail`) || !strings.Contains(log, "Error: Test assertion failed: no") || !strings.Contains(log, "Failure! 0 passed, 1 failed.") || strings.Contains(log, `"@level"`) {
		t.Fatalf("the failed run's log:\n%s", log)
	}
	if got := tb.text("#test-status"); got != "finished fail: 0 passed, 1 failed" {
		t.Fatalf("the failed run's status: %q", got)
	}
	tb.screenshot("module-test-run")
}
