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
	// Every private module's Tests cell leads to its tests page (where
	// they are turned on); the tested one's, to its runs.
	if links := must(tb, chromedp.Evaluate[int](`document.querySelectorAll('#modules td.tests a').length`)); links != 3 {
		t.Fatalf("%d Tests cells link to a tests page, want 3", links)
	}
	tb.press(`#modules tbody tr:nth-child(3) td.tests a`)
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

// TestModuleTestSettingsFromPage: those who may run a module's tests turn
// them on and off and keep the module's test variables on its tests page
// (a sensitive value is never shown, not even in the page's markup), and
// choose where they run (the server or one of the organization's agent
// pools); a taken key and a pool deleted meanwhile are refused with the
// reason; a member who only reads the registry sees where the tests run
// and none of the forms.
func TestModuleTestSettingsFromPage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("lib"), Provider: tfe.String("null")}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "lib", Provider: "null", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	enabled := func() bool {
		t.Helper()
		m, err := e.Client.RegistryModules.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return m.TestConfig != nil && m.TestConfig.TestsEnabled
	}
	const page, secret = "/app/acme/registry/modules/private/acme/lib/null/tests", "s3cr3t-from-the-page"

	tb := newTab(t, e, e.Token)
	tb.open(page)
	if got := tb.text("#tests-state"); !strings.HasPrefix(got, "Tests are off.") {
		t.Fatalf("a new module's tests: %q", got)
	}
	tb.press(`#toggle-tests button`)
	tb.waitText("#tests-state", "Tests are enabled.", time.Minute)
	if !enabled() {
		t.Fatal("the page's Enable tests did not enable them")
	}

	add := func(key, value string, sensitive bool) {
		t.Helper()
		tb.open(page)
		tb.do(chromedp.SendKeys(chromedp.CSS(`#add-test-var input[name=key]`), key), chromedp.SendKeys(chromedp.CSS(`#add-test-var input[name=value]`), value))
		if sensitive {
			tb.do(chromedp.Click(chromedp.CSS(`#add-test-var input[name=sensitive]`)))
		}
		tb.press(`#add-test-var button`)
	}
	add("TF_VAR_token", secret, true)
	tb.waitText("#test-vars", "TF_VAR_token", time.Minute)
	add("TF_VAR_region", "eu-west-1", false)
	tb.waitText("#test-vars", "eu-west-1", time.Minute)
	if html := tb.html(); strings.Contains(html, secret) || !strings.Contains(tb.text("#test-vars"), "sensitive") {
		t.Fatalf("the sensitive test variable on the page: value shown %v, marked sensitive %v", strings.Contains(html, secret), strings.Contains(tb.text("#test-vars"), "sensitive"))
	}
	vars, err := e.Client.TestVariables.List(ctx, id, nil)
	if err != nil || len(vars.Items) != 2 {
		t.Fatalf("the module's test variables after two were added on the page: %+v, %v", vars, err)
	}
	add("TF_VAR_token", "again", false)
	if got := tb.text(`[role=alert]`); !strings.Contains(got, `key "TF_VAR_token" has already been taken`) {
		t.Fatalf("a taken key's refusal: %q", got)
	}
	tb.open(page)
	tb.press(`#test-vars tbody tr:nth-child(2) button`) // TF_VAR_region (the list is in creation order)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if vars, err = e.Client.TestVariables.List(ctx, id, nil); err == nil && len(vars.Items) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the test variable deleted on the page: %+v, %v", vars, err)
		}
	}
	if vars.Items[0].Key != "TF_VAR_token" {
		t.Fatalf("the page deleted %+v's neighbour", vars.Items[0])
	}
	wantPageEvent(t, e, "var", "create", "", http.StatusCreated)

	// The page does not even open a sensitive value: with the sealed
	// value damaged (it no longer opens), the page still lists the
	// variable, as sensitive.
	var sealed string
	if err := e.Server.DB.QueryRow(ctx, `SELECT value FROM variables WHERE id = ?`, vars.Items[0].ID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if sealed == secret || len(sealed) < 8 {
		t.Fatalf("the sensitive test variable is stored as %q: not sealed, nothing to damage", sealed)
	}
	if _, err := e.Server.DB.Exec(ctx, `UPDATE variables SET value = ? WHERE id = ?`, sealed[:len(sealed)-4], vars.Items[0].ID); err != nil {
		t.Fatal(err)
	}
	st := newTab(t, e, e.Token) // tb may still be following the delete's redirect
	if code := st.open(page); code != http.StatusOK {
		t.Fatalf("the tests page with a sensitive value that does not open: %d (%s)", code, st.text("main"))
	}
	if key, value := st.text("#test-vars tbody td:nth-child(1)"), st.text("#test-vars tbody td:nth-child(2)"); key != "TF_VAR_token" || value != "sensitive" {
		t.Fatalf("the test variable with a sensitive value that does not open: %q = %q", key, value)
	}

	// Where the tests run: the server, or an agent pool of the
	// organization's chosen on the page (the API's test-config then says
	// so); each choice is audited as the API's module update.
	const moduleUpdate = "PATCH /api/v2/organizations/{org}/registry-modules/{registry}/{ns}/{name}/{provider}"
	updates := func() int {
		t.Helper()
		n := 0
		for _, ev := range uiEvents(e.AuditTrail(t)) {
			if ev.Resource.Meta["route"] == moduleUpdate && ev.Resource.Meta["status"] == "200" {
				n++
			}
		}
		return n
	}
	config := func() *tfe.TestConfig {
		t.Helper()
		m, err := e.Client.RegistryModules.Read(ctx, id)
		if err != nil || m.TestConfig == nil || m.TestConfig.AgentExecutionMode == nil {
			t.Fatalf("the module's test-config: %+v, %v", m, err)
		}
		return m.TestConfig
	}
	choose := func(poolID string) {
		t.Helper()
		tb.open(page)
		tb.do(chromedp.SetValue(chromedp.CSS(`#tests-execution select`), poolID))
		tb.press(`#tests-execution button`)
	}
	st = newTab(t, e, e.Token)
	st.open(page)
	if got := st.text("#tests-where"); got != "Tests run on the server." {
		t.Fatalf("where a new module's tests run: %q", got)
	}
	pools := map[string]*tfe.AgentPool{}
	for _, name := range []string{"private-net", "lab"} {
		pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		pools[name] = pool
	}
	testenv.NewOrg(t, e.Client, "other")
	if _, err := e.Client.AgentPools.Create(ctx, "other", tfe.AgentPoolCreateOptions{Name: tfe.String("theirs")}); err != nil {
		t.Fatal(err)
	}
	before := updates()
	tb.open(page)
	if got := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tests-execution option')).map(function(o){return o.textContent + "=" + o.value})`)); strings.Join(got, " ") != "Server= lab="+pools["lab"].ID+" private-net="+pools["private-net"].ID {
		t.Fatalf("the choices of where the tests run: %q (want the server and acme's pools)", got)
	}
	choose(pools["private-net"].ID)
	tb.waitText("#tests-where", "Tests run on agent pool private-net.", time.Minute)
	if tc := config(); *tc.AgentExecutionMode != "agent" || tc.AgentPoolID == nil || *tc.AgentPoolID != pools["private-net"].ID || !tc.TestsEnabled {
		t.Fatalf("the test-config after choosing private-net on the page: %+v, want enabled on agent pool %s", tc, pools["private-net"].ID)
	}
	if got := must(tb, chromedp.Evaluate[string](`document.querySelector('#tests-execution select').value`)); got != pools["private-net"].ID {
		t.Fatalf("the form's choice after choosing private-net: %q", got)
	}
	if n := updates(); n != before+1 {
		t.Fatalf("%d module update events done through the pages after choosing a pool, want %d", n, before+1)
	}

	// A pool deleted while the form was open is refused, saying why, and
	// the tests stay where they were.
	tb.open(page)
	tb.do(chromedp.SetValue(chromedp.CSS(`#tests-execution select`), pools["lab"].ID))
	if err := e.Client.AgentPools.Delete(ctx, pools["lab"].ID); err != nil {
		t.Fatal(err)
	}
	tb.press(`#tests-execution button`)
	if got := tb.text(`[role=alert]`); !strings.Contains(got, `agent pool "`+pools["lab"].ID+`" not found in organization "acme"`) {
		t.Fatalf("choosing a deleted pool: %q", got)
	}
	if got := tb.text("#tests-where"); got != "Tests run on agent pool private-net." {
		t.Fatalf("where the tests run after a refused choice, on the page: %q", got)
	}
	if tc := config(); tc.AgentPoolID == nil || *tc.AgentPoolID != pools["private-net"].ID {
		t.Fatalf("a refused choice moved the tests: %+v", tc)
	}

	// A member who reads the registry sees the runs and where they run,
	// not the settings.
	rt := newTab(t, e, userToken(t, e, "acme", "reader@acme.test"))
	rt.open(page)
	if got := rt.text("#tests-state"); got != "Tests are enabled." || rt.exists("#toggle-tests") || rt.exists("#test-vars") || rt.exists("#add-test-var") || rt.exists("#tests-execution") {
		t.Fatalf("a reader's tests page: %q, toggle %v, variables %v, execution %v", got, rt.exists("#toggle-tests"), rt.exists("#test-vars"), rt.exists("#tests-execution"))
	}
	if got := rt.text("#tests-where"); got != "Tests run on agent pool private-net." {
		t.Fatalf("where the tests run, to a reader: %q", got)
	}
	tb.open(page)
	tb.screenshot("module-test-settings")

	choose("")
	tb.waitText("#tests-where", "Tests run on the server.", time.Minute)
	if tc := config(); *tc.AgentExecutionMode != "remote" || tc.AgentPoolID != nil || !tc.TestsEnabled {
		t.Fatalf("the test-config after choosing the server on the page: %+v", tc)
	}
	if n := updates(); n != before+2 {
		t.Fatalf("%d module update events done through the pages after choosing the server, want %d", n, before+2)
	}

	tb.open(page)
	tb.press(`#toggle-tests button`)
	tb.waitText("#tests-state", "Tests are off.", time.Minute)
	if enabled() {
		t.Fatal("the page's Turn tests off did not")
	}
}
