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
