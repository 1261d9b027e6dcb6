package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// getPage GETs a UI page as token and returns its status and markup.
func getPage(t *testing.T, e *testenv.Env, token, path string) (int, string) {
	t.Helper()
	st, b := e.API(t, token, "GET", path, nil)
	return st, string(b)
}

// The apply section of a run page shows only when an apply can still
// happen or did: a run waiting for confirmation shows it pending; an
// errored or a discarded run says its apply will not run.
func TestRunPageApplySection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	waiting, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, waiting.ID, tfe.RunPlanned)
	_, body := getPage(t, e, e.Token, "/app/acme/workspaces/app/runs/"+waiting.ID)
	if !strings.Contains(body, `id="apply-log"`) || strings.Contains(body, `id="apply-skipped"`) {
		t.Errorf("a run waiting for confirmation does not show its pending apply:\n%s", body)
	}
	if err := e.Client.Runs.Discard(ctx, waiting.ID, tfe.RunDiscardOptions{Comment: tfe.String("not today")}); err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, waiting.ID, tfe.RunDiscarded)

	bad, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("bad")})
	if err != nil {
		t.Fatal(err)
	}
	testenv.UploadConfig(ctx, t, e.Client, bad.ID, `output "x" { value = nope.nothing }`)
	errored, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: bad})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, errored.ID, tfe.RunErrored)

	for _, p := range []string{"/app/acme/workspaces/app/runs/" + waiting.ID, "/app/acme/workspaces/bad/runs/" + errored.ID} {
		st, body := getPage(t, e, e.Token, p)
		if st != http.StatusOK {
			t.Fatalf("%s: %d", p, st)
		}
		if strings.Contains(body, `id="apply-log"`) || strings.Contains(body, "Apply <small>pending") || !strings.Contains(body, `id="apply-skipped"`) {
			t.Errorf("%s: the page shows an apply that will never happen:\n%s", p, body)
		}
	}
}

// A run page leads back to its workspace (the breadcrumb and the page's
// header), names who started it, when and how, and shows its comments,
// the one given with discard among them.
func TestRunPageNamesItsWorkspaceAndComments(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	owners, err := e.Client.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		t.Fatalf("owners team: %v %v", owners, err)
	}
	alice, _ := e.UserClient(t, "acme", "alice@acme.test", owners.Items[0])
	rn, err := alice.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, Message: tfe.String("try the app")})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, rn.ID, tfe.RunPlanned)
	if err := alice.Runs.Discard(ctx, rn.ID, tfe.RunDiscardOptions{Comment: tfe.String("not <today>")}); err != nil {
		t.Fatal(err)
	}
	st, body := getPage(t, e, e.Token, "/app/acme/workspaces/app/runs/"+rn.ID)
	if st != http.StatusOK {
		t.Fatalf("run page: %d", st)
	}
	crumb := between(body, `id="crumb"`, `</p>`)
	if !strings.Contains(crumb, `<a href="/app/acme/workspaces/app">app</a>`) || !strings.Contains(crumb, rn.ID) {
		t.Errorf("the breadcrumb does not lead to the workspace: %s", crumb)
	}
	meta := between(body, `id="run-meta"`, `</p>`)
	for _, want := range []string{`href="/app/acme/workspaces/app"`, `id="run-creator">alice<`, `id="run-source">the API<`, "started"} {
		if !strings.Contains(meta, want) {
			t.Errorf("the run's header lacks %s: %s", want, meta)
		}
	}
	if !strings.Contains(between(body, "<h1>", "</h1>"), "try the app") {
		t.Errorf("the title is not the run's message: %s", between(body, "<h1>", "</h1>"))
	}
	comments := between(body, `id="comments"`, `</section>`)
	if !strings.Contains(comments, "not &lt;today&gt;") || !strings.Contains(comments, "alice") {
		t.Errorf("the discard's comment is not shown: %q", comments)
	}
}

// between is the part of s after the first from and before the next to
// ("" when from is missing).
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	s = s[i+len(from):]
	if j := strings.Index(s, to); j >= 0 {
		return s[:j]
	}
	return s
}

// Statuses read as HCP Terraform says them (planned_and_finished is
// "Planned and finished"), with the API's value kept in data-status and
// the title, and in #run-status, which tests and scripts read; the
// workspace list's latest run reads the same.
func TestRunStatusLabels(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	rn, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, PlanOnly: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	testenv.WaitRun(ctx, t, e.Client, rn.ID, tfe.RunPlannedAndFinished)
	badge := `<span class="status ok" data-status="planned_and_finished" title="planned_and_finished">Planned and finished</span>`
	_, body := getPage(t, e, e.Token, "/app/acme/workspaces/app/runs/"+rn.ID)
	if !strings.Contains(body, badge) || !strings.Contains(body, `<data id="run-status" value="planned_and_finished" hidden>planned_and_finished</data>`) {
		t.Errorf("the run's status badge:\n%s", between(body, "<main>", `<pre`))
	}
	if _, body := getPage(t, e, e.Token, "/app/acme/workspaces"); !strings.Contains(body, badge) {
		t.Errorf("the workspace list's latest run:\n%s", between(body, `<table class="workspaces">`, `</table>`))
	}
}
