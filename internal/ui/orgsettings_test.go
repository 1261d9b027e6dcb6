package ui_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// readOrg reads an organization through the API as the site admin.
func readOrg(t *testing.T, e *testenv.Env, name string) *tfe.Organization {
	t.Helper()
	o, err := e.Client.Organizations.Read(context.Background(), name)
	if err != nil {
		t.Fatalf("reading organization %s: %v", name, err)
	}
	return o
}

// An owner changes the organization's settings on the General page: the
// API reads what was saved, and the settings the page does not offer (the
// API's, which nothing here acts on) are left as they were; renaming
// moves the page to the new name, and the old one is gone.
func TestOrgSettingsUpdateAndRename(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	pool, err := e.Client.AgentPools.Create(context.Background(), "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool-a")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Organizations.Update(context.Background(), "acme", tfe.OrganizationUpdateOptions{
		SessionTimeout: tfe.Int(45), CostEstimationEnabled: tfe.Bool(true), AllowForceDeleteWorkspaces: tfe.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	tb := ownerTab(t, e, "acme", "owner@acme.test")

	if st := tb.open("/app/acme/settings"); st != http.StatusOK {
		t.Fatalf("settings page: %d", st)
	}
	if got := fieldValue(tb, "#org-settings", "email"); got != "ops@acme.test" {
		t.Errorf("the form shows email %q, want the stored ops@acme.test", got)
	}
	if checked(tb, "#org-settings", "assessments_enforced") {
		t.Fatal("assessments show enforced before anyone enforced them")
	}
	if !checked(tb, "#org-settings", "allow_force_delete_workspaces") {
		t.Fatal("force delete by admins shows off after the API turned it on")
	}
	if tb.exists(`#org-settings [name=session_timeout]`) || tb.exists(`#org-settings [name=cost_estimation_enabled]`) {
		t.Error("the form offers settings Terrace does not act on")
	}
	fillForm(tb, "#org-settings", map[string]string{"email": "platform@acme.test"})
	check(tb, "#org-settings", "assessments_enforced")
	tb.press(`#org-settings input[name=allow_force_delete_workspaces]`)
	tb.press(`#org-settings input[name=default_execution_mode][value=local]`)
	tb.press("#save-settings")
	tb.waitLocation("/app/acme/settings?saved=1")
	if got := tb.text("#saved"); !strings.Contains(got, "saved") {
		t.Errorf("no confirmation after saving: %q", got)
	}
	o := readOrg(t, e, "acme")
	if o.Email != "platform@acme.test" || !o.AssessmentsEnforced || o.DefaultExecutionMode != "local" || o.AllowForceDeleteWorkspaces {
		t.Errorf("the API reads email %q, assessments enforced %v, execution mode %q, force delete by admins %v; want platform@acme.test, true, local, false",
			o.Email, o.AssessmentsEnforced, o.DefaultExecutionMode, o.AllowForceDeleteWorkspaces)
	}
	if o.SessionTimeout != 45 || o.SessionRemember != 20160 || !o.SpeculativePlanManagementEnabled || !o.CostEstimationEnabled {
		t.Errorf("settings the form does not offer changed: session timeout %d, remember %d, speculative plan management %v, cost estimation %v",
			o.SessionTimeout, o.SessionRemember, o.SpeculativePlanManagementEnabled, o.CostEstimationEnabled)
	}
	// The saved page shows what is stored.
	if got := fieldValue(tb, "#org-settings", "email"); got != "platform@acme.test" {
		t.Errorf("after saving the form shows email %q", got)
	}
	if !checked(tb, "#org-settings", "assessments_enforced") {
		t.Error("after saving the form does not show assessments enforced")
	}

	// Agent execution on a pool of the organization's.
	tb.press(`#org-settings input[name=default_execution_mode][value=agent]`)
	fillForm(tb, "#org-settings", map[string]string{"default_agent_pool": pool.ID})
	must(tb, chromedp.Evaluate[bool](`(function(){document.getElementById('saved').remove();return true})()`))
	tb.press("#save-settings")
	tb.waitJS(`document.readyState === "complete" && (document.querySelector('#saved') || document.querySelector('#form-error') || !document.querySelector('#org-settings'))`, "answered the saved settings")
	if !tb.exists("#saved") {
		t.Fatalf("saving agent execution on %s failed: %s", pool.ID, tb.html())
	}
	if o := readOrg(t, e, "acme"); o.DefaultExecutionMode != "agent" || o.DefaultAgentPool == nil || o.DefaultAgentPool.ID != pool.ID {
		t.Errorf("the API reads execution mode %q and pool %v, want agent on %s", o.DefaultExecutionMode, o.DefaultAgentPool, pool.ID)
	}
	if got := fieldValue(tb, "#org-settings", "default_agent_pool"); got != pool.ID {
		t.Errorf("the saved page shows default pool %q, want %s", got, pool.ID)
	}

	fillForm(tb, "#org-settings", map[string]string{"name": "acme-renamed"})
	tb.press("#save-settings")
	tb.waitLocation("/app/acme-renamed/settings?saved=1")
	if got := fieldValue(tb, "#org-settings", "name"); got != "acme-renamed" {
		t.Errorf("the renamed organization's page shows name %q", got)
	}
	if o := readOrg(t, e, "acme-renamed"); o.Email != "platform@acme.test" {
		t.Errorf("the renamed organization reads email %q", o.Email)
	}
	if _, err := e.Client.Organizations.Read(context.Background(), "acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Errorf("the old name still reads: %v", err)
	}
	wantPageEvent(t, e, "organization", "update", "acme", http.StatusOK)
}

// A refused change (a reserved or invalid name, a bad email or number) is
// shown in the form with the reason, with everything typed kept; nothing
// is saved.
func TestOrgSettingsBadInputKept(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	tb := ownerTab(t, e, "acme", "owner@acme.test")
	for _, tc := range []struct {
		what   string
		fields map[string]string
		want   string
	}{
		{"a reserved name", map[string]string{"name": "settings", "email": "typed@acme.test"}, "reserved"},
		{"an invalid name", map[string]string{"name": "no spaces!", "email": "typed@acme.test"}, "is invalid"},
		{"an invalid email", map[string]string{"name": "acme", "email": "not an address"}, "not a valid address"},
	} {
		tb.open("/app/acme/settings")
		fillForm(tb, "#org-settings", tc.fields)
		check(tb, "#org-settings", "assessments_enforced")
		tb.press("#save-settings")
		got := tb.waitText("#form-error", tc.want, time.Minute)
		if !strings.Contains(tb.location(), "/app/acme/settings") || strings.Contains(tb.location(), "saved") {
			t.Errorf("%s: the refused form went to %s", tc.what, tb.location())
		}
		for name, v := range tc.fields {
			if kept := fieldValue(tb, "#org-settings", name); kept != v {
				t.Errorf("%s: the form lost %s: %q, typed %q (error %q)", tc.what, name, kept, v, got)
			}
		}
		if !checked(tb, "#org-settings", "assessments_enforced") {
			t.Errorf("%s: the form lost the ticked assessments box", tc.what)
		}
		o := readOrg(t, e, "acme")
		if o.Email != "ops@acme.test" || o.AssessmentsEnforced {
			t.Errorf("%s: the refused form changed the organization: email %q, assessments enforced %v", tc.what, o.Email, o.AssessmentsEnforced)
		}
	}
	// The status is the API's for a refused attribute.
	tb.open("/app/acme/settings")
	if st := postFrom(tb, "/app/acme/settings", map[string]string{"name": "static", "email": "ops@acme.test", "default_execution_mode": "remote"}); st != http.StatusUnprocessableEntity {
		t.Errorf("a reserved name answers %d, want 422", st)
	}
}

// Deleting takes the organization's name typed: a wrong one is refused in
// place, keeps what was typed and deletes nothing; the right one deletes
// the organization and leads to the organizations list.
func TestOrgDeleteNeedsItsName(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	tb := ownerTab(t, e, "acme", "owner@acme.test")
	tb.open("/app/acme/settings")
	fillForm(tb, "#delete-org", map[string]string{"confirm": "acm"})
	tb.press("#delete-organization")
	tb.waitText("#delete-error", "nothing was deleted", time.Minute)
	if got := fieldValue(tb, "#delete-org", "confirm"); got != "acm" {
		t.Errorf("the confirmation typed is not kept: %q", got)
	}
	readOrg(t, e, "acme")
	if st := postFrom(tb, "/app/acme/settings/delete", map[string]string{"confirm": "ACME"}); st != http.StatusUnprocessableEntity {
		t.Errorf("a confirmation in other letters answers %d, want 422", st)
	}
	readOrg(t, e, "acme")

	tb.open("/app/acme/settings")
	fillForm(tb, "#delete-org", map[string]string{"confirm": "acme"})
	tb.press("#delete-organization")
	tb.waitLocation("/app/organizations")
	if _, err := e.Client.Organizations.Read(context.Background(), "acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Errorf("the organization still reads after its deletion: %v", err)
	}
}

// A member who does not manage the organization reads its settings but is
// offered no form, and the forms' posts are refused: nothing changes.
func TestOrgSettingsReadOnlyForMembers(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	tb := newTab(t, e, userToken(t, e, "acme", "member@acme.test"))
	if st := tb.open("/app/acme/settings"); st != http.StatusOK {
		t.Fatalf("a member's settings page: %d", st)
	}
	for _, sel := range []string{"#org-settings", "#delete-org", "#save-settings", "#delete-organization", "main form[method=post]"} {
		if tb.exists(sel) {
			t.Errorf("a member is offered %s", sel)
		}
	}
	if !tb.exists("#org-email") {
		t.Error("a member is not shown the settings")
	} else if got := tb.text("#org-email"); got != "ops@acme.test" {
		t.Errorf("the member reads email %q", got)
	}
	if st := postFrom(tb, "/app/acme/settings", map[string]string{"name": "taken-over", "email": "evil@acme.test",
		"default_execution_mode": "local"}); st != http.StatusForbidden {
		t.Errorf("a member's settings post answers %d, want 403", st)
	}
	if st := postFrom(tb, "/app/acme/settings/delete", map[string]string{"confirm": "acme"}); st != http.StatusForbidden {
		t.Errorf("a member's delete answers %d, want 403", st)
	}
	o := readOrg(t, e, "acme")
	if o.Email != "ops@acme.test" || o.DefaultExecutionMode != "remote" || o.SessionTimeout != 20160 {
		t.Errorf("a refused member changed the organization: email %q, mode %q, session timeout %d", o.Email, o.DefaultExecutionMode, o.SessionTimeout)
	}
}

// The organization's navigation links to the settings for those the
// settings pages answer: every member (they read the organization and its
// members, as the API lets them), the forms asking more. The settings
// page links to the members page, and to the VCS providers only for those
// that page answers (an owner, not a plain member).
func TestOrganizationMenuSettingsLink(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "globex")
	member := userToken(t, e, "acme", "member@acme.test")
	stranger := userToken(t, e, "globex", "member@globex.test")
	for _, tc := range []struct {
		who, token string
		vcs        bool
	}{{"a member", member, false}, {"an owner", e.Token, true}} {
		st, body := getPage(t, e, tc.token, "/app/acme/workspaces")
		if st != http.StatusOK {
			t.Fatalf("%s: workspaces page %d", tc.who, st)
		}
		nav := between(body, `<nav aria-label="organization">`, `</nav>`)
		if !strings.Contains(nav, `href="/app/acme/settings"`) {
			t.Errorf("%s: the menu has no settings link: %s", tc.who, nav)
		}
		st, body = getPage(t, e, tc.token, "/app/acme/settings")
		if st != http.StatusOK {
			t.Errorf("%s: the settings page the menu links to answers %d", tc.who, st)
		}
		tabs := between(body, `<nav class="tabs" id="settings-tabs">`, `</nav>`)
		if !strings.Contains(tabs, `href="/app/acme/settings/members"`) {
			t.Errorf("%s: the settings page does not link to the members: %s", tc.who, tabs)
		}
		if got := strings.Contains(tabs, `href="/app/acme/settings/version-control"`); got != tc.vcs {
			t.Errorf("%s: the settings page links to the VCS providers %v, want %v", tc.who, got, tc.vcs)
		}
		if st, _ := getPage(t, e, tc.token, "/app/acme/settings/members"); st != http.StatusOK {
			t.Errorf("%s: the members page answers %d", tc.who, st)
		}
	}
	// Someone of another organization: neither page, and no menu of acme.
	for _, p := range []string{"/app/acme/settings", "/app/acme/settings/members"} {
		st, body := getPage(t, e, stranger, p)
		if st != http.StatusNotFound || strings.Contains(body, `href="/app/acme/settings"`) {
			t.Errorf("a stranger's %s answers %d (want 404) or links to acme's settings", p, st)
		}
	}
}
