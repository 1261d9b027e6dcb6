package ui_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// The apply prints twice, seconds apart, so that its log is followed while
// it runs.
const appConfig = `
resource "terraform_data" "app" {
  input = "hello"
  provisioner "local-exec" {
    command = "echo stream-first; sleep 3; echo stream-second"
  }
}
output "greeting" {
  value = terraform_data.app.output
}
output "password" {
  value     = "s3cr3t-value-xyz"
  sensitive = true
}
`

// setupApp makes organization acme with workspace app holding appConfig.
func setupApp(t *testing.T, e *testenv.Env) *tfe.Workspace {
	t.Helper()
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	testenv.UploadConfig(ctx, t, e.Client, ws.ID, appConfig)
	return ws
}

// A run started from the workspace page streams its logs live, shows its
// plan's changes, is confirmed from the page, and its outputs show with the
// sensitive one hidden.
func TestRunFromTheBrowser(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	setupApp(t, e)
	tb := newTab(t, e, e.Token)

	if st := tb.open("/app/acme/workspaces"); st != http.StatusOK {
		t.Fatalf("workspace list: %d", st)
	}
	if !strings.Contains(tb.text("table.workspaces"), "app") {
		t.Fatalf("workspace list lacks app: %q", tb.text("table.workspaces"))
	}
	tb.screenshot("workspaces")
	tb.open("/app/acme/workspaces/app")
	tb.screenshot("workspace")
	tb.do(
		chromedp.SendKeys(chromedp.CSS(`#start-run input[name=message]`), "from the browser"),
	)
	tb.press(`#start-run button`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#plan-log`)))
	runPath := strings.TrimPrefix(tb.location(), e.URL)
	if !strings.HasPrefix(runPath, "/app/acme/workspaces/app/runs/run-") {
		t.Fatalf("starting a run led to %s", tb.location())
	}
	tb.waitText("#run-status", "planned", 2*time.Minute)
	// The workspace has structured run output (the default): the log is
	// terraform's JSON log lines, which the page shows as text.
	if log := tb.text("#plan-log"); !strings.Contains(log, "\nPlan: 1 to add") || !strings.Contains(log, "\nterraform_data.app: Plan to create\n") || strings.Contains(log, `"@level"`) {
		t.Fatalf("plan log: %q", log)
	}
	if ch := tb.text("#changes"); !strings.Contains(ch, "terraform_data.app") || !strings.Contains(ch, "create") || !strings.Contains(ch, `input = "hello"`) {
		t.Fatalf("resource changes: %q", ch)
	}
	tb.screenshot("planned")

	// The confirm button is gone once the next page (apply queued) shows.
	tb.press(`#confirm`)
	tb.waitJS(`!document.querySelector('#confirm') && document.querySelector('#apply-log[data-live]')`, "a page with a live apply log and no confirm button")
	// Record what reaches the apply log after the page loaded: only the
	// live stream can bring it (sessionStorage outlives the reload at the
	// log's end).
	live := must(tb, chromedp.Evaluate[bool](`(function(){
		var pre = document.querySelector('#apply-log'), before = pre.textContent.length;
		new MutationObserver(function(){ sessionStorage.setItem('streamed', pre.textContent.slice(before)); })
			.observe(pre, {childList: true, characterData: true, subtree: true});
		return pre.hasAttribute('data-live');
	})()`))
	if !live {
		t.Fatal("the apply log is not live after confirming")
	}
	tb.waitText("#run-status", "applied", 2*time.Minute)
	streamed := must(tb, chromedp.Evaluate[string](`sessionStorage.getItem('streamed') || ''`))
	if !strings.Contains(streamed, "stream-second") || strings.Contains(streamed, `"@message"`) {
		t.Fatalf("the apply's output did not arrive, as text, through the live stream; streamed: %q", streamed)
	}
	if log := tb.text("#apply-log"); !strings.Contains(log, "\nApply complete!") || !strings.Contains(log, "\npassword = (sensitive value)") ||
		!strings.Contains(log, "\ngreeting = \"hello\"") || strings.Contains(log, `"@level"`) {
		t.Fatalf("apply log: %q", log)
	}
	if tb.exists("#confirm") || tb.exists("#discard") {
		t.Fatal("an applied run still offers confirm or discard")
	}
	tb.screenshot("applied")

	tb.open("/app/acme/workspaces/app")
	outs := tb.text("#outputs")
	if !strings.Contains(outs, "greeting") || !strings.Contains(outs, "hello") {
		t.Fatalf("outputs: %q", outs)
	}
	if !strings.Contains(tb.text(`#outputs tr[data-output=password]`), "sensitive") {
		t.Fatalf("sensitive output row: %q", tb.text(`#outputs tr[data-output=password]`))
	}
	tb.screenshot("outputs")
	for _, p := range []string{"/app/acme/workspaces/app", "/app/acme/workspaces/app/states"} {
		tb.open(p)
		if strings.Contains(tb.html(), "s3cr3t-value-xyz") {
			t.Fatalf("%s shows the sensitive output's value", p)
		}
	}
	tb.screenshot("states")

	// On a phone-sized screen nothing scrolls sideways.
	tb.do(chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/app/acme/workspaces", "/app/acme/workspaces/app", runPath} {
		tb.open(p)
		if wide := must(tb, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`)); wide {
			tb.screenshot("too-wide")
			t.Errorf("%s is wider than a 390px screen", p)
		}
	}
	tb.screenshot("narrow-run")
	runID := runPath[strings.LastIndex(runPath, "/")+1:]
	wantPageEvent(t, e, "run", "create", runID, http.StatusCreated)
	wantPageEvent(t, e, "run", "apply", runID, http.StatusAccepted)
}

// A member whose team cannot see a workspace gets a not-found page for it
// and does not find it in the list; with read access the page shows but
// offers no run, lock or confirm, and the server refuses them anyway.
func TestMemberWithoutAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("readers"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("reader@acme.test"), Teams: []*tfe.Team{team}})
	if err != nil {
		t.Fatal(err)
	}
	e.Accept(t, m.ID)
	_, token, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	// A run waiting for confirmation, started by the admin.
	r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, token)

	if st := tb.open("/app/acme/workspaces/app"); st != http.StatusNotFound {
		t.Fatalf("a member without access got %d for the workspace page", st)
	}
	if !strings.Contains(tb.text("#error"), "404") {
		t.Fatalf("error page: %q", tb.text("#error"))
	}
	tb.screenshot("no-workspace")
	tb.open("/app/acme/workspaces")
	if strings.Contains(tb.text("table.workspaces"), "app") || tb.exists("#create-ws") {
		t.Fatalf("the list shows what the member may not see or do: %q", tb.text("table.workspaces"))
	}
	if st := tb.open("/app/acme/workspaces/app/runs/" + r.ID); st != http.StatusNotFound {
		t.Fatalf("a member without access got %d for the run page", st)
	}
	if st := tb.open("/app/acme/audit"); st != http.StatusForbidden && st != http.StatusNotFound {
		t.Fatalf("a member got %d for the audit trail", st)
	}

	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	waitRunStatus(t, e, r.ID, tfe.RunPlanned)
	if st := tb.open("/app/acme/workspaces/app"); st != http.StatusOK {
		t.Fatalf("a reader got %d for the workspace page", st)
	}
	for _, sel := range []string{"#start-run", "#lock-form"} {
		if tb.exists(sel) {
			t.Errorf("a reader is offered %s", sel)
		}
	}
	tb.screenshot("reader-workspace")
	tb.open("/app/acme/workspaces/app/runs/" + r.ID)
	tb.waitText("#run-status", "planned", time.Minute)
	for _, sel := range []string{"#confirm", "#discard", "#cancel"} {
		if tb.exists(sel) {
			t.Errorf("a reader is offered %s", sel)
		}
	}
	tb.screenshot("reader-run")
	// Posting the confirm form anyway (with a valid CSRF token) is refused.
	code := must(tb, chromedp.Evaluate[int](`fetch(location.pathname + '/apply', {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'},
		body: 'csrf_token=' + encodeURIComponent(document.querySelector('meta[name=csrf-token]').content)}).then(function(r){ return r.status })`, chromedp.EvalAwaitPromise))
	if code != http.StatusForbidden {
		t.Fatalf("a reader confirming a run got %d, want 403", code)
	}
	if run, err := e.Client.Runs.Read(ctx, r.ID); err != nil || run.Status != tfe.RunPlanned {
		t.Fatalf("after a reader's confirm the run is %v (%v)", run.Status, err)
	}
}

func waitRunStatus(t *testing.T, e *testenv.Env, id string, want tfe.RunStatus) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		r, err := e.Client.Runs.Read(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is %s, want %s", id, r.Status, want)
		}
	}
}

// TestRunLogStreamFollowsTheRun: the apply's live log of a run waiting for
// confirmation ends once the run is discarded (its apply will never run).
// The stream reads the run again and again; a request memo would give it
// the status it first read forever (core.WithoutMemo).
func TestRunLogStreamFollowsTheRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	rn, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, rn.ID, tfe.RunPlanned)

	sctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(sctx, "GET", e.URL+"/app/acme/workspaces/app/runs/"+rn.ID+"/logs/apply", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("the apply's log stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	// The stream is open (its first lines came) before the run changes.
	sc := bufio.NewScanner(res.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "retry:") {
		t.Fatalf("the stream began with %q (%v)", sc.Text(), sc.Err())
	}
	if err := e.Client.Runs.Discard(ctx, rn.ID, tfe.RunDiscardOptions{}); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		if sc.Text() == "event: end" {
			return
		}
	}
	t.Fatalf("the apply's log stream of a discarded run did not end (%v)", sc.Err())
}
