package ui_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// checked reports whether the checkbox name of the form sel is checked.
func checked(tb *tab, sel, name string) bool {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[bool](fmt.Sprintf(`document.querySelector(%q).elements[%q].checked`, sel, name)))
}

// check ticks the checkbox name of the form sel.
func check(tb *tab, sel, name string) {
	tb.t.Helper()
	if !must(tb, chromedp.Evaluate[bool](fmt.Sprintf(`(function(){var e=document.querySelector(%q).elements[%q];e.checked=true;return e.checked})()`, sel, name))) {
		tb.t.Fatalf("the form %s has no checkbox %s", sel, name)
	}
}

// A refused new variable (a key terraform cannot name, a key taken) is
// shown with the reason in the add form, open, with everything typed but
// a value marked sensitive, which never comes back to the browser.
func TestVariableFormKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("REGION"), Value: tfe.String("eu"), Category: tfe.Category(tfe.CategoryEnv)}); err != nil {
		t.Fatal(err)
	}
	const page, form = "/app/acme/workspaces/app/variables", "#add-var"
	tb := newTab(t, e, e.Token)
	open := func() bool {
		return must(tb, chromedp.Evaluate[bool](`document.querySelector('#add-var-details').open`))
	}

	tb.open(page)
	if open() {
		t.Fatal("the add variable form is open on a fresh page")
	}
	tb.press("#add-var-details summary")
	fillForm(tb, form, map[string]string{"key": "bad key", "value": "[1, 2]", "description": "the zones"})
	check(tb, form, "hcl")
	tb.press(form + " button")
	if got := tb.text("[role=alert]"); !strings.Contains(got, `key "bad key" is invalid`) {
		t.Fatalf("the refusal of a key with a space: %q", got)
	}
	tb.screenshot("variable-refused")
	if !open() {
		t.Fatal("the add variable form is closed after its refusal")
	}
	for name, want := range map[string]string{"key": "bad key", "value": "[1, 2]", "description": "the zones", "category": "terraform"} {
		if got := fieldValue(tb, form, name); got != want {
			t.Errorf("the refused form's %s: %q, want %q", name, got, want)
		}
	}
	if !checked(tb, form, "hcl") || checked(tb, form, "sensitive") {
		t.Errorf("the refused form's checkboxes: hcl %v, sensitive %v; want hcl only", checked(tb, form, "hcl"), checked(tb, form, "sensitive"))
	}

	// A taken key, marked sensitive: all is kept but the value.
	const secret = "typed-s3cr3t-4711"
	tb.open(page)
	tb.press("#add-var-details summary")
	fillForm(tb, form, map[string]string{"key": "REGION", "value": secret, "category": "env", "description": "where"})
	check(tb, form, "sensitive")
	tb.press(form + " button")
	if got := tb.text("[role=alert]"); !strings.Contains(got, `key "REGION" has already been taken`) {
		t.Fatalf("the refusal of a taken key: %q", got)
	}
	if !open() {
		t.Fatal("the add variable form is closed after its refusal")
	}
	for name, want := range map[string]string{"key": "REGION", "value": "", "description": "where", "category": "env"} {
		if got := fieldValue(tb, form, name); got != want {
			t.Errorf("the refused sensitive form's %s: %q, want %q", name, got, want)
		}
	}
	if !checked(tb, form, "sensitive") || checked(tb, form, "hcl") {
		t.Errorf("the refused form's checkboxes: hcl %v, sensitive %v; want sensitive only", checked(tb, form, "hcl"), checked(tb, form, "sensitive"))
	}
	if strings.Contains(tb.html(), secret) {
		t.Fatal("the refused form sent the sensitive value back to the browser")
	}
}
