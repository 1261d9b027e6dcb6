package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

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
		if name != "plain" {
			ids[name] = testenv.EnableModuleTests(ctx, t, e.Client, "acme", name, "null")
			continue
		}
		if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String(name), Provider: tfe.String("null")}); err != nil {
			t.Fatal(err)
		}
	}
	// Two runs: the older fails, the newer (the one shown) passes.
	for _, want := range []string{"3", "2"} {
		tr := testenv.StartTestRun(ctx, t, e.Client, ids["tested"], map[string]string{
			"main.tf":               "output \"two\" { value = 1 + 1 }\n",
			"tests/math.tftest.hcl": "run \"adds\" {\n  command = plan\n  assert {\n    condition     = output.two == " + want + "\n    error_message = \"no\"\n  }\n}\n",
		})
		testenv.WaitTestRun(ctx, t, e.Client, ids["tested"], tr.ID, tfe.TestRunFinished)
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

// TestModuleTestRunCancel: a test run's page lets those who run the
// module's tests cancel it (terraform is interrupted: the run ends
// canceled) and, while a cancel waits for terraform, force-cancel it;
// a member who may only read the registry sees neither.
func TestModuleTestRunCancel(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	id := testenv.EnableModuleTests(ctx, t, e.Client, "acme", "slow", "null")
	slow := map[string]string{
		"main.tf":               "resource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 10\"\n  }\n}\n",
		"tests/slow.tftest.hcl": "run \"waits\" {}\n",
	}
	page := func(runID string) string { return "/app/acme/registry/modules/private/acme/slow/null/tests/" + runID }

	// A reader sees the run, and no button.
	reader := userToken(t, e, "acme", "reader@acme.test") // a member: reads the registry, manages no modules
	tr := testenv.StartTestRun(ctx, t, e.Client, id, slow)
	testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID, tfe.TestRunRunning)
	rt := newTab(t, e, reader)
	rt.open(page(tr.ID))
	if got := rt.text("#test-status"); !strings.HasPrefix(got, "running") || rt.exists("#cancel") || rt.exists("#force-cancel") {
		t.Fatalf("a reader's view of a running test run: status %q, cancel %v, force-cancel %v", got, rt.exists("#cancel"), rt.exists("#force-cancel"))
	}

	// The admin cancels it: terraform is interrupted, the run ends canceled.
	tb := newTab(t, e, e.Token)
	tb.open(page(tr.ID))
	tb.press("#cancel")
	if r := testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID, tfe.TestRunCanceled); !r.StatusTimestamps.ForceCanceledAt.IsZero() {
		t.Fatalf("a canceled test run was force-canceled: %+v", r)
	}
	tb.open(page(tr.ID))
	if got := tb.text("#test-status"); !strings.HasPrefix(got, "canceled") || tb.exists("#cancel") {
		t.Fatalf("the canceled run's page: status %q, cancel button %v", got, tb.exists("#cancel"))
	}

	// A run whose executor no longer answers (its lease another's): the
	// cancel waits, and the page offers to force it.
	stuck := testenv.StartTestRun(ctx, t, e.Client, id, slow)
	testenv.WaitTestRun(ctx, t, e.Client, id, stuck.ID, tfe.TestRunRunning)
	if _, err := e.Server.DB.Exec(ctx, `UPDATE module_test_runs SET runner_id = 'an-executor-gone-quiet', lease_until = ? WHERE id = ?`,
		time.Now().Add(time.Hour).UnixMicro(), stuck.ID); err != nil {
		t.Fatal(err)
	}
	signaled := func(want string) {
		t.Helper()
		var signal string
		for deadline := time.Now().Add(time.Minute); signal != want; time.Sleep(50 * time.Millisecond) {
			if err := e.Server.DB.QueryRow(ctx, `SELECT signal FROM module_test_runs WHERE id = ?`, stuck.ID).Scan(&signal); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the stuck run's signal: %q, want %q", signal, want)
			}
		}
	}
	tb.open(page(stuck.ID))
	tb.press("#cancel")
	signaled("cancel")
	tb.open(page(stuck.ID))
	if !tb.exists("#force-cancel") || tb.exists("#cancel") || tb.text("#test-status") != "running canceling: terraform was interrupted" {
		t.Fatalf("a run whose cancel waits: force-cancel %v, cancel %v (want force-cancel only)", tb.exists("#force-cancel"), tb.exists("#cancel"))
	}
	tb.press("#force-cancel")
	signaled("force")
	if r, err := e.Client.TestRuns.Read(ctx, id, stuck.ID); err != nil || r.StatusTimestamps.ForceCanceledAt.IsZero() {
		t.Fatalf("the force-canceled run: %+v, %v (want its force-canceled-at)", r, err)
	}
	tb.open(page(stuck.ID))
	if got := tb.text("#test-signal"); got != "force-canceling: terraform is killed" || tb.exists("#force-cancel") {
		t.Fatalf("the force-canceled run's page: %q, force-cancel %v", got, tb.exists("#force-cancel"))
	}
	tb.screenshot("module-test-force-cancel")
	// In the audit trail as the API's cancel and force-cancel (202).
	wantPageEvent(t, e, "cancel", "create", tr.ID, http.StatusAccepted)
	wantPageEvent(t, e, "force-cancel", "create", stuck.ID, http.StatusAccepted)
}
