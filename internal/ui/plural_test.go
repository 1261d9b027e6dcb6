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
