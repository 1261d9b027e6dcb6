package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// projectNamed reads org's project name through the API (nil when there
// is none).
func projectNamed(t *testing.T, e *testenv.Env, org, name string) *tfe.Project {
	t.Helper()
	l, err := e.Client.Projects.List(context.Background(), org, &tfe.ProjectListOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range l.Items {
		if p.Name == name {
			return p
		}
	}
	return nil
}

// isOpen reports whether the details element sel is open.
func isOpen(tb *tab, sel string) bool {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[bool](`!!document.querySelector(`+jsString(sel)+`).open`))
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`).Replace(s) + `"`
}

// An owner creates a project through the projects page, renames it and
// changes its description, and deletes it: each lands in the API as made
// and in the audit trail as the API route. Deleting a project that still
// holds a workspace is refused with the service's reason in its row, and
// the default project is offered for no deletion (a post anyway is
// refused with the reason).
func TestProjectFormsCreateEditDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/projects"

	tb.open(page)
	if !tb.exists(`tr[data-project="Default Project"] form.edit-project`) {
		t.Error("an owner is not offered to edit the default project")
	}
	if tb.exists(`tr[data-project="Default Project"] form.delete-project`) {
		t.Error("the default project is offered for deletion")
	}
	tb.press("#new-project-details summary")
	fillForm(tb, "#new-project", map[string]string{"name": "infra", "description": "the base layer"})
	tb.press("#new-project button")
	tb.waitJS(`document.querySelector('tr[data-project="infra"]')`, "showed the new project")
	p := projectNamed(t, e, "acme", "infra")
	if p == nil || p.Description != "the base layer" {
		t.Fatalf("the project made through the page: %+v", p)
	}
	if got := tb.text(`tr[data-project="infra"] .description`); got != "the base layer" {
		t.Errorf("the new project's description reads %q", got)
	}
	wantPageEvent(t, e, "project", "create", p.ID, http.StatusCreated)

	// Rename it and change its description.
	row := `tr[data-project="infra"]`
	tb.press(row + " details summary")
	fillForm(tb, row+" form.edit-project", map[string]string{"name": "infra-core", "description": "changed"})
	tb.press(row + " form.edit-project button")
	tb.waitJS(`document.querySelector('tr[data-project="infra-core"]')`, "showed the renamed project")
	if got, err := e.Client.Projects.Read(ctx, p.ID); err != nil || got.Name != "infra-core" || got.Description != "changed" {
		t.Fatalf("the edited project: %+v %v", got, err)
	}
	wantPageEvent(t, e, "project", "update", p.ID, http.StatusOK)

	// A project holding a workspace is not deleted: the reason shows in
	// its row.
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: &tfe.Project{ID: p.ID}})
	if err != nil {
		t.Fatal(err)
	}
	row = `tr[data-project="infra-core"]`
	tb.open(page)
	tb.press(row + " form.delete-project button")
	if got := tb.text(row + " [role=alert]"); !strings.Contains(got, "still contains 1 workspace") {
		t.Fatalf("the refused deletion reads %q", got)
	}
	tb.screenshot("delete-refused")
	if _, err := e.Client.Projects.Read(ctx, p.ID); err != nil {
		t.Fatalf("the refused deletion deleted the project: %v", err)
	}

	// The default project, posted anyway: refused, with the reason.
	def := projectNamed(t, e, "acme", "Default Project")
	if st, body := postPage(tb, "/app/acme/projects/"+def.ID+"/delete"); st != http.StatusConflict || !strings.Contains(body, "default project of an organization cannot be deleted") {
		t.Errorf("deleting the default project: %d %s", st, between(body, `role="alert">`, "<"))
	}

	if err := e.Client.Workspaces.DeleteByID(ctx, ws.ID); err != nil {
		t.Fatal(err)
	}
	tb.open(page)
	tb.press(row + " form.delete-project button")
	tb.waitJS(`location.pathname === "/app/acme/projects" && document.readyState === "complete" && !document.querySelector('tr[data-project="infra-core"]')`, "left out the deleted project")
	if _, err := e.Client.Projects.Read(ctx, p.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("the deleted project reads: %v", err)
	}
	wantPageEvent(t, e, "project", "delete", p.ID, http.StatusNoContent)
	if projectNamed(t, e, "acme", "Default Project") == nil {
		t.Fatal("the default project is gone")
	}
}

// A refused project form (a name the service refuses, a name taken) shows
// the reason and keeps what was typed, open; the edit form of a project
// the same, in its row, the project unchanged.
func TestProjectFormKeepsWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	taken, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "infra", Description: tfe.String("kept")})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page, form = "/app/acme/projects", "#new-project"

	for _, tc := range []struct{ name, want string }{
		{"bad/name", "Name may only contain letters"},
		{"infra", `name "infra" has already been taken`},
	} {
		tb.open(page)
		if isOpen(tb, "#new-project-details") {
			t.Fatal("the new project form is open on a fresh page")
		}
		tb.press("#new-project-details summary")
		fillForm(tb, form, map[string]string{"name": tc.name, "description": "typed description"})
		tb.press(form + " button")
		if got := tb.text("#new-project-error"); !strings.Contains(got, tc.want) {
			t.Fatalf("the refusal of %q reads %q, want %q", tc.name, got, tc.want)
		}
		if !isOpen(tb, "#new-project-details") {
			t.Errorf("the new project form is closed after the refusal of %q", tc.name)
		}
		for name, want := range map[string]string{"name": tc.name, "description": "typed description"} {
			if got := fieldValue(tb, form, name); got != want {
				t.Errorf("the refused form's %s: %q, want %q", name, got, want)
			}
		}
	}
	tb.screenshot("new-refused")
	if l, err := e.Client.Projects.List(ctx, "acme", nil); err != nil || len(l.Items) != 2 {
		t.Fatalf("the refused forms made projects: %v %v", l, err)
	}

	// The edit form, refused, in its row.
	row := `tr[data-project="infra"]`
	tb.open(page)
	tb.press(row + " details summary")
	fillForm(tb, row+" form.edit-project", map[string]string{"name": "no/slashes", "description": "new words"})
	tb.press(row + " form.edit-project button")
	if got := tb.text(row + " [role=alert]"); !strings.Contains(got, "Name may only contain letters") {
		t.Fatalf("the refused edit reads %q", got)
	}
	if !isOpen(tb, row+" details") {
		t.Error("the refused edit form is closed")
	}
	for name, want := range map[string]string{"name": "no/slashes", "description": "new words"} {
		if got := fieldValue(tb, row+" form.edit-project", name); got != want {
			t.Errorf("the refused edit form's %s: %q, want %q", name, got, want)
		}
	}
	if tb.exists("#new-project-error") || isOpen(tb, "#new-project-details") {
		t.Error("the edit form's refusal shows in the new project form")
	}
	if got, err := e.Client.Projects.Read(ctx, taken.ID); err != nil || got.Name != "infra" || got.Description != "kept" {
		t.Fatalf("the refused edit changed the project: %+v %v", got, err)
	}
}
