package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// An error page leads back to the page above the missing one when the
// caller reads it (the workspace of a missing run, else the
// organization's workspaces), and shows no organization navigation for
// an organization that does not exist.
func TestErrorPagesLeadBack(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	setupApp(t, e)
	for _, tc := range []struct {
		path, parent string
		nav          bool
	}{
		{"/app/acme/workspaces/app/runs/run-nope", `href="/app/acme/workspaces/app" id="error-parent"`, true},
		{"/app/acme/workspaces/nope", `href="/app/acme/workspaces" id="error-parent"`, true},
		{"/app/acme/workspaces/nope/runs/run-nope", `href="/app/acme/workspaces" id="error-parent"`, true},
		{"/app/nope/workspaces", "", false},
		{"/app/nope/workspaces/app", "", false},
	} {
		st, body := getPage(t, e, e.Token, tc.path)
		if st != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", tc.path, st)
		}
		if got := strings.Contains(body, `<nav aria-label="organization">`); got != tc.nav {
			t.Errorf("%s: organization navigation shown %v, want %v", tc.path, got, tc.nav)
		}
		if tc.parent == "" {
			if strings.Contains(body, `id="error-parent"`) {
				t.Errorf("%s: leads back to a page of an organization that does not exist: %s", tc.path, between(body, `<h1 id="error">`, "</main>"))
			}
		} else if !strings.Contains(body, tc.parent) {
			t.Errorf("%s: does not lead back with %s: %s", tc.path, tc.parent, between(body, `<h1 id="error">`, "</main>"))
		}
		if !strings.Contains(body, `<a href="/app/">Back to your organizations</a>`) {
			t.Errorf("%s: no way back to the organizations", tc.path)
		}
	}
}
