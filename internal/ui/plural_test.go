package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// The workspace list counts in words that agree: "1 workspace".
func TestWorkspaceCountPlural(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	setupApp(t, e)
	if _, err := e.Client.Workspaces.Create(context.Background(), "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("db")}); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{
		"/app/acme/workspaces?search=app": `<p id="workspace-total">1 workspace</p>`,
		"/app/acme/workspaces":            `<p id="workspace-total">2 workspaces</p>`,
		"/app/acme/workspaces?search=zz":  `<p id="workspace-total">0 workspaces</p>`,
	} {
		if _, body := getPage(t, e, e.Token, path); !strings.Contains(body, want) {
			t.Errorf("%s: %q, want %s", path, between(body, `id="workspace-total"`, "</p>"), want)
		}
	}
}

// The workspace list links the getting-started page, which no longer
// names a CA file the server did not tell it.
func TestGettingStartedLinked(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, body := getPage(t, e, e.Token, "/app/acme/workspaces"); !strings.Contains(body, `<a href="/app/acme/getting-started" id="getting-started">`) {
		t.Errorf("the workspace list does not link the getting-started page")
	}
	if _, body := getPage(t, e, e.Token, "/app/acme/getting-started"); strings.Contains(body, ".terrace/tls/ca.pem") || !strings.Contains(body, `id="cloud-block"`) {
		t.Errorf("the getting-started page:\n%s", between(body, "<main>", "</main>"))
	}
	// Its heading reads true on every visit, not only the first.
	if _, body := getPage(t, e, e.Token, "/app/acme/getting-started"); between(body, "<h1>", "</h1>") != "Connect terraform to acme" {
		t.Errorf("the getting-started heading: %q", between(body, "<h1>", "</h1>"))
	}
}
