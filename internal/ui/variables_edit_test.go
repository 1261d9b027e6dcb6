package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/variable"
)

// A workspace's variables are edited and deleted from its variables page,
// as the API's PATCH and DELETE do: a sensitive value is never shown, its
// field left empty keeps it, typed it replaces it; a refused edit keeps
// what was typed (the value of a sensitive one never); readers get no
// forms and their posts are refused.
func TestWorkspaceVariableEditAndDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	const secret, replaced = "s3cret-kept-8821", "n3w-secret-5512"
	region, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("region"), Value: tfe.String("eu"), Category: tfe.Category(tfe.CategoryTerraform)})
	if err != nil {
		t.Fatal(err)
	}
	token, err := e.Client.Variables.Create(ctx, ws.ID, tfe.VariableCreateOptions{Key: tfe.String("TOKEN"), Value: tfe.String(secret), Category: tfe.Category(tfe.CategoryEnv), Sensitive: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	// stored reads a variable as the store keeps it (the API never
	// returns a sensitive value).
	stored := func(id string) *variable.Variable {
		t.Helper()
		v, err := e.Server.Variables.GetWorkspaceVariable(testenv.AsSiteAdmin(ctx), ws.ID, id)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	const page = "/app/acme/workspaces/app/variables"
	row := func(key string) string { return `#vars tr[data-var="` + key + `"]` }
	tb := newTab(t, e, e.Token)

	// A plain variable: its value and description change.
	tb.open(page)
	tb.press(row("region") + " details.edit-var summary")
	fillForm(tb, row("region")+" form.edit-var", map[string]string{"value": "us", "description": "where it runs"})
	tb.press(row("region") + " form.edit-var button")
	tb.waitText(row("region"), "us", 10*time.Second)
	if v := stored(region.ID); v.Value != "us" || v.Description != "where it runs" || v.Key != "region" || v.Sensitive {
		t.Fatalf("region after its edit: %+v", v)
	}

	// A sensitive one: the value field comes empty, and left empty keeps
	// the value.
	tb.open(page)
	if got := fieldValue(tb, row("TOKEN")+" form.edit-var", "value"); got != "" {
		t.Fatalf("the sensitive variable's value field holds %q", got)
	}
	if tb.exists(row("TOKEN") + ` form.edit-var input[name=sensitive]`) {
		t.Error("a sensitive variable is offered to be made non-sensitive")
	}
	tb.press(row("TOKEN") + " details.edit-var summary")
	fillForm(tb, row("TOKEN")+" form.edit-var", map[string]string{"description": "the API token"})
	tb.press(row("TOKEN") + " form.edit-var button")
	tb.waitText(row("TOKEN"), "the API token", 10*time.Second)
	if v := stored(token.ID); v.Value != secret || !v.Sensitive || v.Description != "the API token" {
		t.Fatalf("TOKEN after an edit that left its value empty: sensitive %v, description %q, value kept %v", v.Sensitive, v.Description, v.Value == secret)
	}
	// Typed, it replaces it, and the page shows neither.
	tb.press(row("TOKEN") + " details.edit-var summary")
	fillForm(tb, row("TOKEN")+" form.edit-var", map[string]string{"value": replaced})
	tb.press(row("TOKEN") + " form.edit-var button")
	// The page the post redirects to has every edit form closed.
	tb.waitJS(`!document.querySelector('`+row("TOKEN")+` details.edit-var').open`, "the page after the new value")
	if v := stored(token.ID); v.Value != replaced || !v.Sensitive {
		t.Fatalf("TOKEN after a new value: replaced %v, sensitive %v", v.Value == replaced, v.Sensitive)
	}
	if html := tb.html(); strings.Contains(html, secret) || strings.Contains(html, replaced) {
		t.Fatal("the variables page holds a sensitive value")
	}

	// A refused edit: the page says why with the form open and what was
	// typed kept, and nothing changes.
	tb.press(row("region") + " details.edit-var summary")
	fillForm(tb, row("region")+" form.edit-var", map[string]string{"key": "bad key!", "value": "ap"})
	tb.press(row("region") + " form.edit-var button")
	if got := tb.text(row("region") + " [role=alert]"); !strings.Contains(got, `"bad key!" is invalid`) {
		t.Fatalf("the refusal of an invalid key: %q", got)
	}
	if !must(tb, chromedp.Evaluate[bool](`document.querySelector('`+row("region")+` details.edit-var').open`)) {
		t.Error("the refused edit's form is closed")
	}
	for name, want := range map[string]string{"key": "bad key!", "value": "ap", "description": "where it runs"} {
		if got := fieldValue(tb, row("region")+" form.edit-var", name); got != want {
			t.Errorf("the refused edit's %s: %q, want %q", name, got, want)
		}
	}
	if v := stored(region.ID); v.Key != "region" || v.Value != "us" {
		t.Fatalf("region after a refused edit: %+v", v)
	}

	// A reader sees no forms, and a post of theirs is refused.
	reader := readerTab(t, e, ws)
	reader.open(page)
	if reader.exists("form.edit-var") || reader.exists("form.delete-var") {
		t.Error("a reader of the variables is offered to edit or delete them")
	}
	if st := postFrom(reader, page+"/"+region.ID+"/delete", nil); st != http.StatusForbidden {
		t.Errorf("a reader deleting a variable: %d, want 403", st)
	}
	if st := postFrom(reader, page+"/"+region.ID, map[string]string{"key": "region", "value": "x", "category": "terraform"}); st != http.StatusForbidden {
		t.Errorf("a reader editing a variable: %d, want 403", st)
	}

	// Delete.
	tb.open(page)
	tb.press(row("region") + " form.delete-var button")
	tb.waitJS(`!document.querySelector('`+row("region")+`')`, "the deleted variable gone from the page")
	if l, err := e.Client.Variables.List(ctx, ws.ID, nil); err != nil || len(l.Items) != 1 || l.Items[0].Key != "TOKEN" {
		t.Fatalf("variables after the deletion: %v, %v", l, err)
	}
}
