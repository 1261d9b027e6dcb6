package ui_test

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/workspace"
)

// choose ticks the radio button name=value of the form sel.
func choose(tb *tab, sel, name, value string) {
	tb.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q+' input[name="'+%q+'"][value="'+%q+'"]');if(!e)return false;e.checked=true;return true})()`, sel, name, value)
	if !must(tb, chromedp.Evaluate[bool](js)) {
		tb.t.Fatalf("the form %s has no radio button %s=%s", sel, name, value)
	}
}

// chosen is the value of the checked radio button name of the form sel
// ("" when none is).
func chosen(tb *tab, sel, name string) string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).elements[%q].value`, sel, name)))
}

// waitPath waits until the tab is at path (its whole path, and the query
// when want has one) and the page has loaded.
func waitPath(tb *tab, want string) {
	tb.t.Helper()
	tb.waitJS(fmt.Sprintf(`location.pathname + (%q.includes("?") ? location.search : "") === %q && document.readyState === "complete"`, want, want), "went to "+want)
}

// readWorkspace reads workspace id through the API (nil when it is gone).
func readWorkspace(t *testing.T, e *testenv.Env, id string) *tfe.Workspace {
	t.Helper()
	w, err := e.Client.Workspaces.ReadByID(context.Background(), id)
	if errors.Is(err, tfe.ErrResourceNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// A workspace admin renames the workspace from its settings page (and
// lands on the new name's settings), sets it to local execution with
// auto-apply, shares its state with all of its project, moves it to
// another project and deletes it, typing its name, to land on the
// workspace list; the API sees each change, and the audit trail has
// each as the API's route would record it.
func TestWorkspaceSettingsFromTheBrowser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	tb := ownerTab(t, e, "acme", "admin@acme.test")
	const form = "#ws-settings"

	tb.open("/app/acme/workspaces/app")
	tb.press("#settings-link")
	tb.waitLocation("/app/acme/workspaces/app/settings")
	if got := fieldValue(tb, form, "name"); got != "app" {
		t.Fatalf("the settings form's name: %q", got)
	}
	if chosen(tb, form, "apply_method") != "manual" || fieldValue(tb, form, "execution_mode") != "" {
		t.Fatalf("a new workspace's settings read apply %q, execution %q; want manual and the project's", chosen(tb, form, "apply_method"), fieldValue(tb, form, "execution_mode"))
	}
	fillForm(tb, form, map[string]string{"name": "app-renamed", "execution_mode": "local", "description": "the app", "working_directory": "infra"})
	choose(tb, form, "apply_method", "auto")
	choose(tb, form, "remote_state", "project")
	tb.screenshot("settings")
	tb.press(form + " button")
	waitPath(tb, "/app/acme/workspaces/app-renamed/settings?saved")
	if got := tb.text("#saved"); got != "Settings saved." {
		t.Fatalf("after saving: %q", got)
	}
	w := readWorkspace(t, e, ws.ID)
	if w.Name != "app-renamed" || w.ExecutionMode != "local" || !w.AutoApply || w.Description != "the app" || w.WorkingDirectory != "infra" ||
		w.GlobalRemoteState || !w.ProjectRemoteState {
		t.Fatalf("after saving the API reads name %q, execution %q, auto-apply %v, description %q, working directory %q, global %v, project %v",
			w.Name, w.ExecutionMode, w.AutoApply, w.Description, w.WorkingDirectory, w.GlobalRemoteState, w.ProjectRemoteState)
	}
	if fieldValue(tb, form, "execution_mode") != "local" || chosen(tb, form, "apply_method") != "auto" || chosen(tb, form, "remote_state") != "project" {
		t.Fatalf("the saved settings read execution %q, apply %q, sharing %q", fieldValue(tb, form, "execution_mode"), chosen(tb, form, "apply_method"), chosen(tb, form, "remote_state"))
	}
	wantPageEvent(t, e, "workspace", "update", ws.ID, http.StatusOK)

	// Back to the project's execution mode, and manual apply.
	tb.open("/app/acme/workspaces/app-renamed/settings")
	fillForm(tb, form, map[string]string{"execution_mode": ""})
	choose(tb, form, "apply_method", "manual")
	tb.press(form + " button")
	waitPath(tb, "/app/acme/workspaces/app-renamed/settings?saved")
	if w := readWorkspace(t, e, ws.ID); w.AutoApply || w.SettingOverwrites == nil || *w.SettingOverwrites.ExecutionMode || w.ExecutionMode != "remote" {
		t.Fatalf("back to the project's mode the API reads auto-apply %v, execution %q, overwrites %+v", w.AutoApply, w.ExecutionMode, w.SettingOverwrites)
	}

	// Moved to another project.
	tb.open("/app/acme/workspaces/app-renamed/settings")
	fillForm(tb, "#ws-move", map[string]string{"project": prj.ID})
	tb.press("#ws-move button")
	waitPath(tb, "/app/acme/workspaces/app-renamed/settings?saved")
	if got := tb.text("#project-name"); !strings.Contains(got, "platform") {
		t.Fatalf("after the move the page reads %q", got)
	}
	if w := readWorkspace(t, e, ws.ID); w.Project == nil || w.Project.ID != prj.ID {
		t.Fatalf("after the move the workspace is in %+v, want %s", w.Project, prj.ID)
	}

	// Shared with chosen workspaces only: one added by name (an unknown
	// name is refused and kept), one removed.
	for _, name := range []string{"reporting", "billing"} {
		if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name)}); err != nil {
			t.Fatal(err)
		}
	}
	tb.open("/app/acme/workspaces/app-renamed/settings")
	choose(tb, form, "remote_state", "specific")
	tb.press(form + " button")
	waitPath(tb, "/app/acme/workspaces/app-renamed/settings?saved")
	if w := readWorkspace(t, e, ws.ID); w.GlobalRemoteState || w.ProjectRemoteState {
		t.Fatalf("sharing with chosen workspaces left global %v, project %v", w.GlobalRemoteState, w.ProjectRemoteState)
	}
	consumers := func() []string {
		t.Helper()
		l, err := e.Client.Workspaces.ListRemoteStateConsumers(ctx, ws.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range l.Items {
			names = append(names, c.Name)
		}
		return names
	}
	fillForm(tb, "#add-consumer", map[string]string{"workspace": "no-such"})
	tb.press("#add-consumer button")
	if got := tb.waitText("#consumer-error", "not found", time.Minute); fieldValue(tb, "#add-consumer", "workspace") != "no-such" {
		t.Errorf("the refused consumer (%q) was not kept in the form", got)
	}
	for _, name := range []string{"reporting", "billing"} {
		fillForm(tb, "#add-consumer", map[string]string{"workspace": name})
		tb.press("#add-consumer button")
		tb.waitText("#consumer-list", name, time.Minute)
	}
	if got := consumers(); len(got) != 2 {
		t.Fatalf("consumers after adding two: %v", got)
	}
	tb.press(`#consumer-list li[data-consumer=billing] button`)
	tb.waitJS(`document.querySelector('#consumer-list li[data-consumer=reporting]') && !document.querySelector('#consumer-list li[data-consumer=billing]')`, "billing removed from the list")
	if got := consumers(); len(got) != 1 || got[0] != "reporting" {
		t.Fatalf("consumers after removing billing: %v, want reporting", got)
	}
	wantPageEvent(t, e, "workspace", "add-remote-state-consumers", ws.ID, http.StatusNoContent)
	wantPageEvent(t, e, "workspace", "remove-remote-state-consumers", ws.ID, http.StatusNoContent)

	// Deleted, its name typed.
	tb.open("/app/acme/workspaces/app-renamed/settings")
	fillForm(tb, "#ws-delete", map[string]string{"confirm": "app-renamed"})
	tb.press("#ws-delete button")
	waitPath(tb, "/app/acme/workspaces")
	if w := readWorkspace(t, e, ws.ID); w != nil {
		t.Fatalf("the deleted workspace is still there: %s", w.Name)
	}
	wantPageEvent(t, e, "workspace", "safe-delete", ws.ID, http.StatusNoContent)
}

// A member who only reads the workspace sees its settings, every input
// disabled, without a Save, Move or Delete button; the forms posted anyway
// are refused and change nothing (read back through the API). A member
// who does not see the workspace gets a 404 for its settings page.
func TestWorkspaceSettingsReadOnlyForReaders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	reader := readerTab(t, e, ws)
	const page = "/app/acme/workspaces/app/settings"

	reader.open("/app/acme/workspaces/app")
	if !reader.exists("#settings-link") {
		t.Fatal("a reader of the workspace has no Settings link")
	}
	if st := reader.open(page); st != http.StatusOK {
		t.Fatalf("a reader's settings page: %d", st)
	}
	if got := fieldValue(reader, "#ws-settings", "name"); got != "app" {
		t.Fatalf("a reader's settings page shows the name %q", got)
	}
	if !must(reader, chromedp.Evaluate[bool](`document.querySelector('#ws-settings fieldset').disabled && document.querySelector('#ws-settings input[name=name]').matches(':disabled')`)) {
		t.Fatal("a reader's settings inputs are not disabled")
	}
	for _, sel := range []string{"#ws-settings button", "#ws-delete", "#ws-move", "#add-consumer"} {
		if reader.exists(sel) {
			t.Errorf("a reader is offered %s", sel)
		}
	}
	reader.screenshot("reader")
	for _, p := range []struct {
		path   string
		fields map[string]string
	}{
		{page, map[string]string{"name": "taken-over", "apply_method": "auto", "execution_mode": "local", "remote_state": "global"}},
		{page + "/project", map[string]string{"project": prj.ID}},
		{page + "/delete", map[string]string{"confirm": "app", "mode": "safe"}},
		{page + "/delete", map[string]string{"confirm": "app", "mode": "force"}},
	} {
		if st := postFrom(reader, p.path, p.fields); st != http.StatusForbidden && st != http.StatusNotFound {
			t.Errorf("a reader's post to %s %v: %d, want 403 or 404", p.path, p.fields, st)
		}
	}
	w := readWorkspace(t, e, ws.ID)
	if w == nil {
		t.Fatal("a reader deleted the workspace")
	}
	if w.Name != "app" || w.AutoApply || w.ExecutionMode != "remote" || w.GlobalRemoteState || w.Project == nil || w.Project.ID == prj.ID {
		t.Fatalf("a reader's refused posts changed the workspace: name %q, auto-apply %v, execution %q, global %v, project %+v",
			w.Name, w.AutoApply, w.ExecutionMode, w.GlobalRemoteState, w.Project)
	}

	// A member who does not see it.
	other := newTab(t, e, userToken(t, e, "acme", "other@acme.test"))
	if st := other.open(page); st != http.StatusNotFound {
		t.Fatalf("the settings of a workspace a member does not see: %d, want 404", st)
	}
}

// A refused setting (a name the domain refuses, a terraform version that
// is no version, an unknown workspace to share with, agent execution
// without a pool) is shown in the form with the domain's words and
// everything typed kept; nothing is saved.
func TestWorkspaceSettingsKeepBadInput(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Description: tfe.String("before")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("taken")}); err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page, form = "/app/acme/workspaces/app/settings", "#ws-settings"
	for _, c := range []struct {
		what   string
		fields map[string]string
		want   string
	}{
		{"an invalid name", map[string]string{"name": "bad name!", "description": "typed", "terraform_version": "1.9.5", "working_directory": "infra"}, `name "bad name!" is invalid`},
		{"a taken name", map[string]string{"name": "taken", "description": "typed", "terraform_version": "1.9.5", "working_directory": "infra"}, `name "taken" has already been taken`},
		{"an invalid terraform version", map[string]string{"name": "app2", "description": "typed", "terraform_version": "one point nine", "working_directory": "infra"}, `terraform-version "one point nine" is not a valid version or constraint`},
		{"agent mode without a pool", map[string]string{"name": "app2", "description": "typed", "execution_mode": "agent", "working_directory": "infra"}, `agent-pool-id must be specified`},
	} {
		tb.open(page)
		fillForm(tb, form, c.fields)
		choose(tb, form, "apply_method", "auto")
		tb.press(form + " button")
		if got := tb.text("#settings-error"); !strings.Contains(got, c.want) {
			t.Fatalf("%s: the form says %q, want %q", c.what, got, c.want)
		}
		for name, want := range c.fields {
			if got := fieldValue(tb, form, name); got != want {
				t.Errorf("%s: the refused form's %s is %q, want %q", c.what, name, got, want)
			}
		}
		if chosen(tb, form, "apply_method") != "auto" {
			t.Errorf("%s: the refused form lost its apply method", c.what)
		}
		if !strings.HasSuffix(tb.location(), page) {
			t.Errorf("%s: the refusal is at %s", c.what, tb.location())
		}
		w := readWorkspace(t, e, ws.ID)
		if w.Name != "app" || w.Description != "before" || w.AutoApply || w.WorkingDirectory != "" || w.TerraformVersion == "one point nine" {
			t.Fatalf("%s: the refused form saved name %q, description %q, auto-apply %v, working directory %q", c.what, w.Name, w.Description, w.AutoApply, w.WorkingDirectory)
		}
	}
	tb.screenshot("refused")
	if st, _ := postPage(tb, page); st != http.StatusUnprocessableEntity {
		t.Fatalf("an empty settings post: %d, want 422", st)
	}
}

// stateWithResource makes a state version of workspace id holding one
// managed resource.
func stateWithResource(t *testing.T, e *testenv.Env, id string) {
	t.Helper()
	ctx := context.Background()
	state := `{"version":4,"terraform_version":"1.11.4","serial":1,"lineage":"l","outputs":{},"resources":[` +
		`{"mode":"managed","type":"terraform_data","name":"x","provider":"provider[\"terraform.io/builtin/terraform\"]","instances":[{"schema_version":0,"attributes":{"id":"1"}}]}]}`
	if _, err := e.Client.Workspaces.Lock(ctx, id, tfe.WorkspaceLockOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.StateVersions.Create(ctx, id, tfe.StateVersionCreateOptions{Serial: tfe.Int64(1), Lineage: tfe.String("l"),
		MD5: tfe.String(fmt.Sprintf("%x", md5.Sum([]byte(state)))), State: tfe.String(base64.StdEncoding.EncodeToString([]byte(state)))}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Workspaces.Unlock(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// Deleting needs the workspace's name typed: anything else is refused in
// the form and deletes nothing. A workspace that manages resources is
// refused a (safe) delete, as the API's safe-delete refuses it, and goes
// with force, as the API's DELETE deletes it.
func TestWorkspaceDeleteNeedsItsNameAndNoResources(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/workspaces/app/settings"

	tb.open(page)
	fillForm(tb, "#ws-delete", map[string]string{"confirm": "ap"})
	tb.press("#ws-delete button")
	if got := tb.text("#delete-error"); !strings.Contains(got, "type the workspace's name, app, to confirm") {
		t.Fatalf("a wrong confirmation: %q", got)
	}
	if got := fieldValue(tb, "#ws-delete", "confirm"); got != "ap" {
		t.Errorf("the refused confirmation reads %q", got)
	}
	if readWorkspace(t, e, ws.ID) == nil {
		t.Fatal("a wrong confirmation deleted the workspace")
	}
	if st, _ := postPage(tb, page+"/delete"); st != http.StatusUnprocessableEntity || readWorkspace(t, e, ws.ID) == nil {
		t.Fatalf("a delete without confirmation: %d", st)
	}

	stateWithResource(t, e, ws.ID)
	tb.open(page)
	if got := tb.text("#resource-count"); !strings.Contains(got, "manages 1 resource") {
		t.Fatalf("the resource count reads %q", got)
	}
	fillForm(tb, "#ws-delete", map[string]string{"confirm": "app"})
	tb.press("#ws-delete button")
	if got := tb.text("#delete-error"); !strings.Contains(got, "still managing resources") {
		t.Fatalf("a safe delete of a workspace that manages resources: %q", got)
	}
	if readWorkspace(t, e, ws.ID) == nil {
		t.Fatal("a safe delete deleted a workspace that manages resources")
	}
	tb.screenshot("safe-delete-refused")
	choose(tb, "#ws-delete", "mode", "force")
	fillForm(tb, "#ws-delete", map[string]string{"confirm": "app"})
	tb.press("#ws-delete button")
	waitPath(tb, "/app/acme/workspaces")
	if readWorkspace(t, e, ws.ID) != nil {
		t.Fatal("a force delete left the workspace")
	}
	wantPageEvent(t, e, "workspace", "delete", ws.ID, http.StatusNoContent)
}

// A workspace admin who is no owner is offered a force delete only when
// the organization's allow-force-delete-workspaces setting lets admins
// (as the API tells can-force-delete): with it off the page says only
// owners may, and a forced post is refused and deletes nothing.
func TestWorkspaceForceDeleteFollowsTheOrganization(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	team, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("admins"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	admin := newTab(t, e, userToken(t, e, "acme", "admin@acme.test", team))
	const page = "/app/acme/workspaces/app/settings"

	admin.open(page)
	if !admin.exists("#ws-delete") || admin.exists(`#ws-delete input[name=mode][value=force]`) {
		t.Fatal("with the setting off an admin should be offered the safe delete only")
	}
	if got := admin.text("#no-force"); !strings.Contains(got, "owners") {
		t.Errorf("the page does not say who may force-delete: %q", got)
	}
	if st := postFrom(admin, page+"/delete", map[string]string{"confirm": "app", "mode": "force"}); st != http.StatusForbidden {
		t.Errorf("an admin's forced delete with the setting off: %d, want 403", st)
	}
	if readWorkspace(t, e, ws.ID) == nil {
		t.Fatal("a refused forced delete deleted the workspace")
	}

	if _, err := e.Client.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{AllowForceDeleteWorkspaces: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	admin.open(page)
	if !admin.exists(`#ws-delete input[name=mode][value=force]`) || admin.exists("#no-force") {
		t.Fatal("with the setting on an admin is not offered the force delete")
	}
	choose(admin, "#ws-delete", "mode", "force")
	fillForm(admin, "#ws-delete", map[string]string{"confirm": "app"})
	admin.press("#ws-delete button")
	waitPath(admin, "/app/acme/workspaces")
	if readWorkspace(t, e, ws.ID) != nil {
		t.Fatal("an admin's forced delete with the setting on left the workspace")
	}
}

// A stack's deployment workspace shows its settings read-only to its
// organization's owners too, with a sentence naming the stack; a post is
// refused with the reason and changes nothing.
func TestWorkspaceSettingsOfAStackDeployment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: prj.ID}})
	if err != nil {
		t.Fatal(err)
	}
	// As the stack's engine makes its deployment's workspace (with the
	// organization's standing, marked as the stack's).
	sctx := authz.WithModel(auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindOrganization, Organization: "acme"}), e.Server.Authz)
	name := "stack-" + st.ID + "-prod"
	ws, err := e.Server.Workspaces.Create(sctx, "acme", workspace.Options{Name: &name, ProjectID: &prj.ID, ManagedBy: &st.ID})
	if err != nil {
		t.Fatal(err)
	}
	tb := ownerTab(t, e, "acme", "owner@acme.test")
	page := "/app/acme/workspaces/" + name + "/settings"
	if code := tb.open(page); code != http.StatusOK {
		t.Fatalf("the settings of a stack's workspace: %d", code)
	}
	if got := tb.text("#managed-by"); !strings.Contains(got, "deployment of stack web") {
		t.Fatalf("the stack's workspace's settings say %q", got)
	}
	if href := must(tb, chromedp.Evaluate[string](`document.querySelector('#managed-by a').getAttribute('href')`)); href != "/app/acme/stacks/"+st.ID {
		t.Errorf("the stack links to %q", href)
	}
	if !must(tb, chromedp.Evaluate[bool](`document.querySelector('#ws-settings fieldset').disabled`)) {
		t.Error("the stack's workspace's settings are not disabled")
	}
	for _, sel := range []string{"#ws-settings button", "#ws-delete", "#ws-move", "#add-consumer"} {
		if tb.exists(sel) {
			t.Errorf("an owner is offered %s on the stack's workspace", sel)
		}
	}
	tb.screenshot("stack-managed")
	code, body := postPage(tb, page)
	if code != http.StatusForbidden || !strings.Contains(body, "deployment of stack "+st.ID) {
		t.Errorf("a settings post on the stack's workspace: %d, want 403 naming the stack", code)
	}
	if code := postFrom(tb, page+"/delete", map[string]string{"confirm": name, "mode": "force"}); code != http.StatusForbidden {
		t.Errorf("a force delete of the stack's workspace: %d, want 403", code)
	}
	if w := readWorkspace(t, e, ws.ID); w == nil || w.Name != name || w.AutoApply {
		t.Fatalf("the refused posts changed the stack's workspace: %+v", w)
	}
}

// The settings offer the terraform versions a workspace may be set to, as
// the service decides it: enabled ones, newest first and deprecated ones
// last, beta ones only where the organization has access to beta tools;
// to those who may change the version only.
func TestWorkspaceSettingsOfferTheSiteVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []tfe.AdminTerraformVersionCreateOptions{
		{Version: tfe.String("1.9.5")},
		{Version: tfe.String("1.10.0")},
		{Version: tfe.String("1.8.0"), Deprecated: tfe.Bool(true), DeprecatedReason: tfe.String("old")},
		{Version: tfe.String("1.7.0"), Enabled: tfe.Bool(false)},
		{Version: tfe.String("2.0.0-beta1"), Beta: tfe.Bool(true)},
	} {
		v.URL, v.Sha = tfe.String("https://releases.example.test/terraform_"+*v.Version+".zip"), tfe.String(strings.Repeat("ab", 32))
		if _, err := e.Client.Admin.TerraformVersions.Create(ctx, v); err != nil {
			t.Fatalf("registering %s: %v", *v.Version, err)
		}
	}
	const page = "/app/acme/workspaces/app/settings"
	offered := func(tb *tab) []string {
		t.Helper()
		return must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#tf-versions option')).map(o => o.value)`))
	}
	owner := newTab(t, e, e.Token)
	owner.open(page)
	wantList(t, "the versions offered", offered(owner), "latest", "1.10.0", "1.9.5", "1.8.0")
	if got := attrs(owner, `#ws-settings input[name=terraform_version]`, "list"); len(got) != 1 || got[0] != "tf-versions" {
		t.Fatalf("the version field's list: %q", got)
	}

	on := true
	if _, err := e.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{AccessBetaTools: &on}); err != nil {
		t.Fatal(err)
	}
	owner.open(page)
	wantList(t, "the versions offered with beta tools", offered(owner), "latest", "2.0.0-beta1", "1.10.0", "1.9.5", "1.8.0")

	reader := readerTab(t, e, ws)
	reader.open(page)
	if reader.exists("#tf-versions") {
		t.Error("a reader, who may not change the version, is offered versions")
	}
}
