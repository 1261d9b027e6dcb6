package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A run the workspace refuses (it has no configuration version yet) is
// shown with the reason, and the start run form keeps the reason typed
// for the run and its choices.
func TestStartRunFormKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("empty")}); err != nil {
		t.Fatal(err)
	}
	const form = "#start-run"
	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/workspaces/empty")
	fillForm(tb, form, map[string]string{"message": "roll back the DNS change"})
	check(tb, form, "destroy")
	tb.press(form + " button")
	if got := tb.text("[role=alert]"); !strings.Contains(got, "no uploaded configuration version") {
		t.Fatalf("the refusal of a run without configuration: %q", got)
	}
	if msg, destroy, planOnly := fieldValue(tb, form, "message"), checked(tb, form, "destroy"), checked(tb, form, "plan_only"); msg != "roll back the DNS change" || !destroy || planOnly {
		t.Fatalf("the refused start run form holds %q, destroy %v, plan only %v; want what was typed", msg, destroy, planOnly)
	}
}
