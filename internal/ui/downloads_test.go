package ui_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// downloaded is a download's answer.
type downloaded struct {
	status int
	header http.Header
	body   []byte
}

// download GETs path as token with the test's HTTP client, keeping the
// headers (e.API keeps none).
func download(t *testing.T, e *testenv.Env, token, path string) downloaded {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("GET %s: reading the answer: %v", path, err)
	}
	return downloaded{res.StatusCode, res.Header, b}
}

// wantAttachment checks a download's headers: a file named filename of
// contentType that no cache keeps and no browser sniffs.
func wantAttachment(t *testing.T, what string, d downloaded, contentType, filename string) {
	t.Helper()
	want := map[string]string{
		"Content-Type":           contentType,
		"Content-Disposition":    `attachment; filename="` + filename + `"`,
		"Cache-Control":          "no-store",
		"X-Content-Type-Options": "nosniff",
	}
	for k, v := range want {
		if got := d.header.Get(k); got != v {
			t.Errorf("%s: %s is %q, want %q", what, k, got, v)
		}
	}
}

// uploadState makes a finalized state version of workspace id holding
// exactly state (as terraform uploads it: the workspace locked meanwhile).
func uploadState(t *testing.T, e *testenv.Env, id string, serial int64, state string) *tfe.StateVersion {
	t.Helper()
	ctx := context.Background()
	if _, err := e.Client.Workspaces.Lock(ctx, id, tfe.WorkspaceLockOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), Lineage: tfe.String("l"), MD5: tfe.String(fmt.Sprintf("%x", md5.Sum([]byte(state))))}
	if state != "" {
		opts.State = tfe.String(base64.StdEncoding.EncodeToString([]byte(state)))
	}
	sv, err := e.Client.StateVersions.Create(ctx, id, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Unlock(ctx, id); err != nil {
		t.Fatal(err)
	}
	return sv
}

// stateBody is a state as terraform might write it, with what an escaping
// or re-encoding would change: indentation, markup characters, non-ASCII
// text and a final newline.
func stateBody(serial int64, note string) string {
	return fmt.Sprintf(`{
  "version": 4,
  "terraform_version": "1.11.4",
  "serial": %d,
  "lineage": "l",
  "outputs": {
    "note": {
      "value": %q,
      "type": "string"
    }
  },
  "resources": []
}
`, serial, note)
}

// fetchInPage fetches href from the tab's page, as a click on a link
// would, and returns the status, the headers and the body read as text.
func fetchInPage(tb *tab, href string) (status int, contentType, disposition, body string) {
	tb.t.Helper()
	js := fmt.Sprintf(`fetch(%q).then(function(r){ return r.text().then(function(b){
		return JSON.stringify({status: r.status, type: r.headers.get('content-type'), disposition: r.headers.get('content-disposition'), body: b});
	}); })`, href)
	raw := must(tb, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	var got struct {
		Status            int
		Type, Disposition string
		Body              string
	}
	if err := json.Unmarshal([]byte(raw), &got); err != nil {
		tb.t.Fatalf("fetching %s in the page: %v (%s)", href, err, raw)
	}
	return got.Status, got.Type, got.Disposition, got.Body
}

// A workspace's States page offers each version whose content is kept
// for download, and the download is the state uploaded, byte for byte,
// as an attachment no cache keeps, recorded in the audit trail as the
// API's download is. A version of another workspace (through this one's
// page), an unknown one, or one whose content is gone is the error page
// saying why, never the state and never a 500.
func TestStateDownload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	app, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	const note = `kept <b>&amp;</b> 'quoted' é ☃`
	old := uploadState(t, e, app.ID, 1, stateBody(1, "old"))
	kept := stateBody(2, note)
	cur := uploadState(t, e, app.ID, 2, kept)
	pending := uploadState(t, e, app.ID, 3, "")
	if err := e.Client.StateVersions.SoftDeleteBackingData(ctx, old.ID); err != nil {
		t.Fatal(err)
	}
	theirs := uploadState(t, e, other.ID, 1, stateBody(1, "the other workspace's state"))
	const states = "/app/acme/workspaces/app/states"
	want := states + "/" + cur.ID + "/download"

	// The page: a link for the kept version only.
	tb := newTab(t, e, e.Token)
	if st := tb.open(states); st != http.StatusOK {
		t.Fatalf("states page: %d", st)
	}
	row := func(id string) string { return `tr[data-version="` + id + `"]` }
	href := must(tb, chromedp.Evaluate[string](fmt.Sprintf(`(function(){var a=document.querySelector(%q);return a?a.getAttribute("href"):""})()`, row(cur.ID)+" a.download")))
	if href != want {
		t.Fatalf("the kept version's download link: %q, want %q", href, want)
	}
	for _, id := range []string{old.ID, pending.ID} {
		if tb.exists(row(id) + " a.download") {
			t.Errorf("version %s, whose content is not kept, is offered for download", id)
		}
	}
	if !tb.exists(row(pending.ID)) || !tb.exists(row(old.ID)) {
		t.Fatal("the page lacks the set aside or the pending version")
	}
	tb.screenshot("states")
	status, typ, disp, body := fetchInPage(tb, href)
	if status != http.StatusOK || typ != "application/json" || disp != `attachment; filename="app-2.tfstate"` || body != kept {
		t.Fatalf("following the link: %d %q %q\n%s", status, typ, disp, body)
	}

	// Byte for byte, with the headers.
	d := download(t, e, e.Token, want)
	if d.status != http.StatusOK || !bytes.Equal(d.body, []byte(kept)) {
		t.Fatalf("download: %d\n%s", d.status, d.body)
	}
	wantAttachment(t, "the state download", d, "application/json", "app-2.tfstate")

	// Another workspace's version through this workspace's path, and an
	// unknown one, are not found, and say nothing of the other state.
	for _, id := range []string{theirs.ID, "sv-doesnotexist000", "nothing"} {
		d := download(t, e, e.Token, states+"/"+id+"/download")
		if d.status != http.StatusNotFound || bytes.Contains(d.body, []byte("the other workspace")) || !bytes.Contains(d.body, []byte("not found in workspace")) {
			t.Errorf("version %s through app's page: %d\n%s", id, d.status, d.body)
		}
		if d.header.Get("Content-Disposition") != "" {
			t.Errorf("version %s through app's page is an attachment", id)
		}
	}
	// Through its own workspace's path it downloads.
	if d := download(t, e, e.Token, "/app/acme/workspaces/other/states/"+theirs.ID+"/download"); d.status != http.StatusOK || !bytes.Contains(d.body, []byte("the other workspace's state")) {
		t.Errorf("other's version through its own page: %d %s", d.status, d.body)
	}

	// A version whose content is gone or not there yet: the error page
	// with the reason.
	for id, reason := range map[string]string{old.ID: "soft deleted", pending.ID: "no content yet"} {
		d := download(t, e, e.Token, states+"/"+id+"/download")
		if d.status != http.StatusNotFound || !bytes.Contains(d.body, []byte(reason)) || !strings.HasPrefix(d.header.Get("Content-Type"), "text/html") {
			t.Errorf("version %s: %d %s, want the error page saying %q\n%s", id, d.status, d.header.Get("Content-Type"), reason, d.body)
		}
	}
	if st := tb.open(states + "/" + old.ID + "/download"); st != http.StatusNotFound || !strings.Contains(tb.text("p.detail"), "soft deleted") ||
		attr(tb, "#error-parent", "href") != "/app/acme/workspaces/app" {
		t.Errorf("the set aside version in the browser: %d %q", st, tb.text("p.detail"))
	}
	tb.screenshot("soft-deleted")

	// The download is in the audit trail as the API's is, without the
	// state.
	wantPageEvent(t, e, "state-version", "read-download", cur.ID, http.StatusOK)
	if st, _ := e.API(t, e.Token, "GET", "/api/v2/state-versions/"+cur.ID+"/download", nil); st != http.StatusOK {
		t.Fatalf("API download: %d", st)
	}
	var page, api int
	for _, ev := range e.AuditTrail(t) {
		if strings.Contains(describe(ev), "quoted") {
			t.Errorf("an event holds the state: %s", describe(ev))
		}
		if ev.Resource.Type != "state-version" || ev.Resource.Action != "read-download" {
			continue
		}
		if ev.Resource.Meta["source"] == "" {
			api++
		} else {
			page++
		}
	}
	if page != 3 || api != 1 {
		t.Errorf("%d page and %d API downloads recorded, want 3 (two of app's, one of other's) and 1", page, api)
	}
}

// Who may not read a workspace's state is offered no download and is
// refused one: a member whose team reads the workspace but only its
// state's outputs gets the refusal the States page gets (403), a member
// who cannot see the workspace a 404; neither gets the state.
func TestStateDownloadRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	sv := uploadState(t, e, ws.ID, 1, stateBody(1, "refused-state-marker"))
	outputsOnly := newTeam(t, e, "acme", "outputs-only", nil)
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessCustom), Team: outputsOnly, Workspace: ws,
		Runs: tfe.RunsPermission(tfe.RunsPermissionRead), StateVersions: tfe.StateVersionsPermission(tfe.StateVersionsPermissionReadOutputs)}); err != nil {
		t.Fatal(err)
	}
	reader := userToken(t, e, "acme", "outputs@acme.test", outputsOnly)
	stranger := userToken(t, e, "acme", "stranger@acme.test")
	const states = "/app/acme/workspaces/app/states"
	path := states + "/" + sv.ID + "/download"

	// The site admin downloads it (the test can fail).
	if d := download(t, e, e.Token, path); d.status != http.StatusOK || !bytes.Contains(d.body, []byte("refused-state-marker")) {
		t.Fatalf("the admin's download: %d %s", d.status, d.body)
	}

	tb := newTab(t, e, reader)
	if st := tb.open("/app/acme/workspaces/app"); st != http.StatusOK {
		t.Fatalf("the outputs-only member's workspace page: %d", st)
	}
	if tb.exists(`a[href="` + states + `"]`) {
		t.Error("the outputs-only member is offered the States page")
	}
	if st := tb.open(states); st != http.StatusForbidden || tb.exists("a.download") || strings.Contains(tb.html(), sv.ID+"/download") {
		t.Errorf("the outputs-only member's States page: %d, download links: %v", st, tb.exists("a.download"))
	}
	tb.screenshot("outputs-only-states")
	for token, want := range map[string]int{reader: http.StatusForbidden, stranger: http.StatusNotFound} {
		d := download(t, e, token, path)
		if d.status != want || bytes.Contains(d.body, []byte("refused-state-marker")) || d.header.Get("Content-Disposition") != "" {
			t.Errorf("a refused download: %d (want %d)\n%s", d.status, want, d.body)
		}
	}
	// Only the admin's download is recorded.
	var recorded []string
	for _, ev := range uiEvents(e.AuditTrail(t)) {
		if ev.Resource.Type == "state-version" {
			recorded = append(recorded, describe(ev))
		}
	}
	if len(recorded) != 1 {
		t.Errorf("downloads recorded: %q, want the admin's only", recorded)
	}
}

// A run's page offers each log it shows as the raw file terraform wrote:
// the same bytes the API's log hands terraform (its JSON log lines as
// they are, no HTML escaping, no STX/ETX framing), as a plain text
// attachment. A log not written yet is offered nowhere and is not found;
// a phase that is not a run's is not found; who cannot see the run gets
// a 404.
func TestRawRunLogDownload(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	rn, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, rn.ID, tfe.RunPlanned)
	runPage := "/app/acme/workspaces/app/runs/" + rn.ID
	tb := newTab(t, e, e.Token)

	// Planned: the plan's log is offered, the apply's (not written) not.
	tb.open(runPage)
	tb.waitText("#run-status", "planned", time.Minute)
	if got := attr(tb, "#plan-log-raw", "href"); got != runPage+"/logs/plan/raw" {
		t.Fatalf("the plan log's download link: %q", got)
	}
	if !tb.exists("#apply-log") || tb.exists("#apply-log-raw") {
		t.Fatalf("a run waiting for confirmation: apply log shown %v, offered for download %v", tb.exists("#apply-log"), tb.exists("#apply-log-raw"))
	}
	if d := download(t, e, e.Token, runPage+"/logs/apply/raw"); d.status != http.StatusNotFound || !bytes.Contains(d.body, []byte("no log yet")) {
		t.Errorf("the apply log before the apply: %d\n%s", d.status, d.body)
	}

	if err := e.Client.Runs.Apply(ctx, rn.ID, tfe.RunApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, rn.ID, tfe.RunApplied)
	done, err := e.Client.Runs.Read(ctx, rn.ID)
	if err != nil {
		t.Fatal(err)
	}
	tb.open(runPage)
	tb.waitText("#run-status", "applied", time.Minute)
	if got := attr(tb, "#apply-log-raw", "href"); got != runPage+"/logs/apply/raw" {
		t.Fatalf("the apply log's download link: %q", got)
	}
	tb.screenshot("applied")

	for _, c := range []struct {
		phase string
		logs  func() (io.Reader, error)
		want  []string
	}{
		{"plan", func() (io.Reader, error) { return e.Client.Plans.Logs(ctx, done.Plan.ID) }, []string{"Plan: 1 to add", "terraform_data.app: Plan to create"}},
		{"apply", func() (io.Reader, error) { return e.Client.Applies.Logs(ctx, done.Apply.ID) }, []string{"Apply complete!", "stream-first", "stream-second"}},
	} {
		path := runPage + "/logs/" + c.phase + "/raw"
		d := download(t, e, e.Token, path)
		if d.status != http.StatusOK {
			t.Fatalf("%s: %d\n%s", path, d.status, d.body)
		}
		wantAttachment(t, c.phase+" log", d, "text/plain; charset=utf-8", rn.ID+"-"+c.phase+".log")
		r, err := c.logs()
		if err != nil {
			t.Fatal(err)
		}
		api, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(d.body, api) {
			t.Errorf("the raw %s log differs from the API's:\nraw: %q\nAPI: %q", c.phase, d.body, api)
		}
		text := string(d.body)
		for _, w := range c.want {
			if !strings.Contains(text, w) {
				t.Errorf("the raw %s log lacks %q:\n%s", c.phase, w, text)
			}
		}
		// Terraform's JSON log lines as written: not the page's legible
		// text, nor HTML-escaped.
		if !strings.Contains(text, `"@message":`) || !strings.Contains(text, `"@level":"info"`) {
			t.Errorf("the raw %s log is not terraform's JSON log:\n%s", c.phase, text)
		}
		for _, bad := range []string{"\x02", "\x03", "&#34;", "&quot;", "&lt;", "&gt;", "&amp;", "&#39;", "s3cr3t-value-xyz"} {
			if strings.Contains(text, bad) {
				t.Errorf("the raw %s log holds %q:\n%q", c.phase, bad, text)
			}
		}
		// Following the link in the page gives the same text.
		st, typ, disp, body := fetchInPage(tb, path)
		if st != http.StatusOK || typ != "text/plain; charset=utf-8" || disp != `attachment; filename="`+rn.ID+"-"+c.phase+`.log"` || body != text {
			t.Errorf("following the %s log's link: %d %q %q", c.phase, st, typ, disp)
		}
	}

	// A phase a run does not have.
	if d := download(t, e, e.Token, runPage+"/logs/bogus/raw"); d.status != http.StatusNotFound || !bytes.Contains(d.body, []byte(`not &#34;bogus&#34;`)) {
		t.Errorf("a bogus phase: %d\n%s", d.status, d.body)
	}
	// Who cannot see the workspace: not found, no log.
	stranger := userToken(t, e, "acme", "stranger@acme.test")
	if d := download(t, e, stranger, runPage+"/logs/apply/raw"); d.status != http.StatusNotFound || bytes.Contains(d.body, []byte("stream-second")) {
		t.Errorf("a member who cannot see the run: %d\n%s", d.status, d.body)
	}
	// Another workspace's run through this workspace's path: not found.
	testWs, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("empty")})
	if err != nil {
		t.Fatal(err)
	}
	if d := download(t, e, e.Token, "/app/acme/workspaces/"+testWs.Name+"/runs/"+rn.ID+"/logs/plan/raw"); d.status != http.StatusNotFound || bytes.Contains(d.body, []byte("Plan: 1 to add")) {
		t.Errorf("a run through another workspace's path: %d\n%s", d.status, d.body)
	}
}

// attr is an attribute of the first element matching sel ("" when none).
func attr(tb *tab, sel, name string) string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[string](fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?(e.getAttribute(%q)||""):""})()`, sel, name)))
}
