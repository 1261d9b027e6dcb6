package ui_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// varsetNamed reads org's variable set name through the API, with the
// workspaces and projects it applies to (nil when there is none).
func varsetNamed(t *testing.T, e *testenv.Env, org, name string) *tfe.VariableSet {
	t.Helper()
	ctx := context.Background()
	l, err := e.Client.VariableSets.List(ctx, org, &tfe.VariableSetListOptions{Query: name})
	if err != nil {
		t.Fatal(err)
	}
	for _, vs := range l.Items {
		if vs.Name == name {
			vs, err := e.Client.VariableSets.Read(ctx, vs.ID, &tfe.VariableSetReadOptions{Include: &[]tfe.VariableSetIncludeOpt{tfe.VariableSetWorkspaces, tfe.VariableSetProjects}})
			if err != nil {
				t.Fatal(err)
			}
			return vs
		}
	}
	return nil
}

// varsetVars are a variable set's variables by key, through the API.
func varsetVars(t *testing.T, e *testenv.Env, id string) map[string]*tfe.VariableSetVariable {
	t.Helper()
	l, err := e.Client.VariableSetVariables.List(context.Background(), id, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tfe.VariableSetVariable{}
	for _, v := range l.Items {
		out[v.Key] = v
	}
	return out
}

func workspaceIDs(ws []*tfe.Workspace) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.ID)
	}
	return out
}

// An owner creates a variable set through the variable sets page, adds a
// sensitive and a plain variable to it, applies it to a workspace and to
// a project, then removes it from the workspace, deletes a variable and
// the set: each lands in the API as made and in the audit trail as the
// API route. The sensitive value never comes back to a page: neither the
// variable sets page nor the workspace's variables page holds it.
func TestVarsetFormsCreateVariablesApplyDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "infra"})
	if err != nil {
		t.Fatal(err)
	}
	const secret = "varset-s3cr3t-value-9381"
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/variable-sets"

	tb.open(page)
	tb.press("#new-varset-details summary")
	fillForm(tb, "#new-varset", map[string]string{"name": "common", "description": "shared settings"})
	check(tb, "#new-varset", "priority")
	tb.press("#new-varset button")
	tb.waitJS(`document.querySelector('section[data-varset="common"]')`, "showed the new variable set")
	vs := varsetNamed(t, e, "acme", "common")
	if vs == nil || vs.Description != "shared settings" || !vs.Priority || vs.Global {
		t.Fatalf("the variable set made through the page: %+v", vs)
	}
	wantPageEvent(t, e, "varset", "create", vs.ID, http.StatusCreated)

	sec := `section[data-varset="common"]`
	for _, v := range []struct {
		fields    map[string]string
		sensitive bool
	}{
		{map[string]string{"key": "api_token", "value": secret, "category": "terraform", "description": "the API's"}, true},
		{map[string]string{"key": "REGION", "value": "eu-west", "category": "env"}, false},
	} {
		tb.open(page)
		tb.press(sec + " details.add-var summary")
		fillForm(tb, sec+" form.add-var", v.fields)
		if v.sensitive {
			check(tb, sec+" form.add-var", "sensitive")
		}
		tb.press(sec + " form.add-var button")
		tb.waitJS(`document.querySelector('`+sec+` tr[data-var="`+v.fields["key"]+`"]')`, "listed variable "+v.fields["key"])
	}
	vars := varsetVars(t, e, vs.ID)
	if tok := vars["api_token"]; tok == nil || !tok.Sensitive || tok.Category != tfe.CategoryTerraform || tok.Description != "the API's" {
		t.Errorf("the sensitive variable made through the page: %+v", tok)
	}
	if r := vars["REGION"]; r == nil || r.Sensitive || r.Value != "eu-west" || r.Category != tfe.CategoryEnv {
		t.Errorf("the plain variable made through the page: %+v", r)
	}
	if got := tb.text(sec + ` tr[data-var="api_token"]`); !strings.Contains(got, "sensitive") {
		t.Errorf("the sensitive variable's row reads %q", got)
	}
	wantPageEvent(t, e, "varset", "add-vars", vs.ID, http.StatusCreated)

	// Applied to the workspace and the project, among those offered.
	for _, id := range []string{ws.ID, prj.ID} {
		tb.open(page)
		fillForm(tb, sec+" form.apply-varset", map[string]string{"target": id})
		tb.press(sec + " form.apply-varset button")
		tb.waitJS(`document.querySelector('`+sec+` li[data-target="`+id+`"]')`, "listed "+id+" as applied")
	}
	tb.screenshot("applied")
	vs = varsetNamed(t, e, "acme", "common")
	if !slices.Contains(workspaceIDs(vs.Workspaces), ws.ID) || len(vs.Projects) != 1 || vs.Projects[0].ID != prj.ID {
		t.Fatalf("the set applies to workspaces %v and projects %v", workspaceIDs(vs.Workspaces), vs.Projects)
	}
	wantPageEvent(t, e, "varset", "add-workspaces", vs.ID, http.StatusNoContent)
	wantPageEvent(t, e, "varset", "add-projects", vs.ID, http.StatusNoContent)
	if got := tb.text(sec + ` li[data-target="` + ws.ID + `"]`); !strings.Contains(got, "app") {
		t.Errorf("the applied workspace reads %q", got)
	}
	if tb.exists(sec + ` form.apply-varset option[value="` + ws.ID + `"]`) {
		t.Error("the workspace the set applies to is offered again")
	}
	if strings.Contains(tb.html(), secret) {
		t.Fatal("the variable sets page holds the sensitive value")
	}
	tb.open("/app/acme/workspaces/app/variables")
	if html := tb.html(); strings.Contains(html, secret) || !strings.Contains(html, "common") {
		t.Fatalf("the workspace's variables page holds the sensitive value (%v) or misses the set (%v)", strings.Contains(html, secret), !strings.Contains(html, "common"))
	}

	// Removed from the workspace; a variable and the set deleted.
	tb.open(page)
	tb.press(sec + ` li[data-target="` + ws.ID + `"] form.remove-target button`)
	tb.waitJS(`location.pathname === "/app/acme/variable-sets" && document.readyState === "complete" && !document.querySelector('`+sec+` li[data-target="`+ws.ID+`"]')`, "left out the removed workspace")
	if vs = varsetNamed(t, e, "acme", "common"); len(vs.Workspaces) != 0 || len(vs.Projects) != 1 {
		t.Fatalf("after removing the workspace the set applies to workspaces %v and projects %v", workspaceIDs(vs.Workspaces), vs.Projects)
	}
	wantPageEvent(t, e, "varset", "remove-workspaces", vs.ID, http.StatusNoContent)

	tb.press(sec + ` tr[data-var="REGION"] form.delete-var button`)
	tb.waitJS(`location.pathname === "/app/acme/variable-sets" && document.readyState === "complete" && !document.querySelector('`+sec+` tr[data-var="REGION"]')`, "left out the deleted variable")
	if vars := varsetVars(t, e, vs.ID); vars["REGION"] != nil || vars["api_token"] == nil {
		t.Fatalf("after deleting REGION the set holds %v", vars)
	}

	tb.press(sec + " form.delete-varset button")
	tb.waitJS(`location.pathname === "/app/acme/variable-sets" && document.readyState === "complete" && !document.querySelector('`+sec+`')`, "left out the deleted set")
	if _, err := e.Client.VariableSets.Read(ctx, vs.ID, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("the deleted set reads: %v", err)
	}
	wantPageEvent(t, e, "varset", "delete", vs.ID, http.StatusNoContent)
}

// A refused variable set form keeps what was typed and shows why: a taken
// name in the new set form (its checkboxes kept); a key the service
// refuses in a set's add variable form (in that set only), all kept but a
// sensitive value, which never comes back to the browser.
func TestVarsetFormsKeepWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	for _, name := range []string{"common", "other"} {
		if _, err := e.Client.VariableSets.Create(ctx, "acme", &tfe.VariableSetCreateOptions{Name: tfe.String(name), Global: tfe.Bool(false)}); err != nil {
			t.Fatal(err)
		}
	}
	tb := newTab(t, e, e.Token)
	const page, form = "/app/acme/variable-sets", "#new-varset"

	tb.open(page)
	tb.press("#new-varset-details summary")
	fillForm(tb, form, map[string]string{"name": "common", "description": "typed"})
	check(tb, form, "global")
	tb.press(form + " button")
	if got := tb.text("#new-varset-error"); !strings.Contains(got, `name "common" has already been taken`) {
		t.Fatalf("the refusal of a taken name reads %q", got)
	}
	if !isOpen(tb, "#new-varset-details") {
		t.Error("the new set form is closed after its refusal")
	}
	for name, want := range map[string]string{"name": "common", "description": "typed"} {
		if got := fieldValue(tb, form, name); got != want {
			t.Errorf("the refused form's %s: %q, want %q", name, got, want)
		}
	}
	if !checked(tb, form, "global") || checked(tb, form, "priority") {
		t.Errorf("the refused form's checkboxes: global %v, priority %v; want global only", checked(tb, form, "global"), checked(tb, form, "priority"))
	}
	if l, err := e.Client.VariableSets.List(ctx, "acme", nil); err != nil || len(l.Items) != 2 {
		t.Fatalf("the refused form made a set: %v %v", l, err)
	}

	// A key terraform cannot name, with a sensitive value.
	const secret = "typed-varset-s3cr3t-5521"
	sec := `section[data-varset="common"]`
	tb.open(page)
	tb.press(sec + " details.add-var summary")
	fillForm(tb, sec+" form.add-var", map[string]string{"key": "bad key", "value": secret, "description": "kept"})
	check(tb, sec+" form.add-var", "sensitive")
	check(tb, sec+" form.add-var", "hcl")
	tb.press(sec + " form.add-var button")
	if got := tb.text(sec + " [role=alert]"); !strings.Contains(got, `key "bad key" is invalid`) {
		t.Fatalf("the refusal of a bad key reads %q", got)
	}
	tb.screenshot("variable-refused")
	if !isOpen(tb, sec+" details.add-var") || isOpen(tb, `section[data-varset="other"] details.add-var`) {
		t.Errorf("after the refusal the set's add variable form is open %v, the other set's %v", isOpen(tb, sec+" details.add-var"), isOpen(tb, `section[data-varset="other"] details.add-var`))
	}
	for name, want := range map[string]string{"key": "bad key", "value": "", "description": "kept", "category": "terraform"} {
		if got := fieldValue(tb, sec+" form.add-var", name); got != want {
			t.Errorf("the refused add variable form's %s: %q, want %q", name, got, want)
		}
	}
	if !checked(tb, sec+" form.add-var", "sensitive") || !checked(tb, sec+" form.add-var", "hcl") {
		t.Error("the refused add variable form lost its checkboxes")
	}
	if tb.exists(`section[data-varset="other"] [role=alert]`) || tb.exists("#new-varset-error") {
		t.Error("the refusal shows for another form too")
	}
	if strings.Contains(tb.html(), secret) {
		t.Fatal("the refused form sent the sensitive value back to the browser")
	}
	if vars := varsetVars(t, e, varsetNamed(t, e, "acme", "common").ID); len(vars) != 0 {
		t.Fatalf("the refused variable is in the set: %v", vars)
	}
}
