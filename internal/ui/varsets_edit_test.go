package ui_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A variable set's settings and variables are edited from the variable
// sets page, as the API's updates do: renamed and made priority (the
// workspaces it applies to stay), a plain value changed, a sensitive one
// kept when its field is left empty and never shown; a refused edit keeps
// what was typed, in the form of the set and the variable it was for.
func TestVarsetEdits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(name string) *tfe.VariableSet {
		vs, err := e.Client.VariableSets.Create(ctx, "acme", &tfe.VariableSetCreateOptions{Name: tfe.String(name), Global: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		return vs
	}
	common, other := mk("common"), mk("other")
	if err := e.Client.VariableSets.ApplyToWorkspaces(ctx, common.ID, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{ws}}); err != nil {
		t.Fatal(err)
	}
	const secret = "set-s3cret-3307"
	region, err := e.Client.VariableSetVariables.Create(ctx, common.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("region"), Value: tfe.String("eu"), Category: tfe.Category(tfe.CategoryTerraform)})
	if err != nil {
		t.Fatal(err)
	}
	token, err := e.Client.VariableSetVariables.Create(ctx, common.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("TOKEN"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	tokenValue := func() string {
		t.Helper()
		v, err := e.Server.Variables.GetVarsetVariable(testenv.AsSiteAdmin(ctx), common.ID, token.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v.Value
	}
	const page = "/app/acme/variable-sets"
	set := func(name string) string { return `section[data-varset="` + name + `"]` }
	tb := newTab(t, e, e.Token)

	// Variables: a plain value changes; a sensitive one left empty stays.
	tb.open(page)
	row := set("common") + ` tr[data-var="region"]`
	tb.press(row + " details.edit-var summary")
	fillForm(tb, row+" form.edit-var", map[string]string{"value": "us"})
	tb.press(row + " form.edit-var button")
	tb.waitText(row, "us", 10*time.Second)
	if v := varsetVars(t, e, common.ID)["region"]; v == nil || v.Value != "us" || v.ID != region.ID {
		t.Fatalf("region after its edit: %+v", v)
	}
	row = set("common") + ` tr[data-var="TOKEN"]`
	tb.press(row + " details.edit-var summary")
	fillForm(tb, row+" form.edit-var", map[string]string{"description": "the API token"})
	tb.press(row + " form.edit-var button")
	tb.waitText(row, "the API token", 10*time.Second)
	if v := varsetVars(t, e, common.ID)["TOKEN"]; v == nil || !v.Sensitive || v.Description != "the API token" || tokenValue() != secret {
		t.Fatalf("TOKEN after an edit that left its value empty: %+v (value kept %v)", v, tokenValue() == secret)
	}
	if strings.Contains(tb.html(), secret) {
		t.Fatal("the variable sets page holds the sensitive value")
	}

	// A refused variable edit (a key taken in the set) opens that form
	// again, in that set, with what was typed.
	row = set("common") + ` tr[data-var="region"]`
	tb.press(row + " details.edit-var summary")
	fillForm(tb, row+" form.edit-var", map[string]string{"key": "TOKEN", "category": "env", "value": "typed"})
	tb.press(row + " form.edit-var button")
	if got := tb.text(row + " [role=alert]"); !strings.Contains(got, "TOKEN") {
		t.Fatalf("the refusal of a taken key: %q", got)
	}
	for name, want := range map[string]string{"key": "TOKEN", "value": "typed", "category": "env"} {
		if got := fieldValue(tb, row+" form.edit-var", name); got != want {
			t.Errorf("the refused edit's %s: %q, want %q", name, got, want)
		}
	}
	if n := must(tb, chromedp.Evaluate[int](`document.querySelectorAll('details.edit-var[open], details.edit-varset[open]').length`)); n != 1 {
		t.Errorf("open edit forms after one refusal: %d", n)
	}

	// The set's settings: renamed, priority; it still applies to app.
	tb.open(page)
	tb.press(set("common") + " details.edit-varset summary")
	fillForm(tb, set("common")+" form.edit-varset", map[string]string{"name": "shared", "description": "for every app"})
	check(tb, set("common")+" form.edit-varset", "priority")
	tb.press(set("common") + " form.edit-varset button")
	tb.waitJS(`!!document.querySelector('`+set("shared")+`')`, "the set under its new name")
	got := varsetNamed(t, e, "acme", "shared")
	if got == nil || got.ID != common.ID || !got.Priority || got.Global || got.Description != "for every app" || len(got.Workspaces) != 1 || got.Workspaces[0].ID != ws.ID {
		t.Fatalf("the set after its settings' edit: %+v", got)
	}
	// A taken name is refused, in that set's settings form, kept.
	tb.press(set("shared") + " details.edit-varset summary")
	fillForm(tb, set("shared")+" form.edit-varset", map[string]string{"name": "other"})
	tb.press(set("shared") + " form.edit-varset button")
	if got := tb.text(set("shared") + " details.edit-varset [role=alert]"); !strings.Contains(got, `"other" has already been taken`) {
		t.Fatalf("the refusal of a taken name: %q", got)
	}
	if got := fieldValue(tb, set("shared")+" form.edit-varset", "name"); got != "other" {
		t.Errorf("the refused settings' name: %q", got)
	}
	if vs := varsetNamed(t, e, "acme", "other"); vs == nil || vs.ID != other.ID {
		t.Fatalf("the other set after the refused rename: %+v", vs)
	}
}
