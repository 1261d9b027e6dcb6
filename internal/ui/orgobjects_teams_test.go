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

// teamNamed reads org's team name through the API (nil when there is
// none).
func teamNamed(t *testing.T, e *testenv.Env, org, name string) *tfe.Team {
	t.Helper()
	l, err := e.Client.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{name}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tm := range l.Items {
		if tm.Name == name {
			return tm
		}
	}
	return nil
}

// teamUsers are the usernames of a team's members, through the API.
func teamUsers(t *testing.T, e *testenv.Env, teamID string) []string {
	t.Helper()
	us, err := e.Client.TeamMembers.ListUsers(context.Background(), teamID)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, u := range us {
		out = append(out, u.Username)
	}
	return out
}

// tick ticks the checkbox of the form sel whose name and value are given.
func tick(tb *tab, sel, name, value string) {
	tb.t.Helper()
	js := `(function(){var e=document.querySelector(` + jsString(sel+` input[name="`+name+`"][value="`+value+`"]`) + `);if(!e)return false;e.checked=true;return true})()`
	if !must(tb, chromedp.Evaluate[bool](js)) {
		tb.t.Fatalf("the form %s has no checkbox %s=%s", sel, name, value)
	}
}

// ticked are the values of the checkboxes name of the form sel that are
// ticked.
func ticked(tb *tab, sel, name string) []string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(`+jsString(sel+` input[name="`+name+`"]:checked`)+`)).map(function(e){return e.value})`))
}

// An owner creates a visible team with organization access through the
// teams page, adds a member of the organization by username (the page
// lists them), removes them and deletes the team: each lands in the API as
// made and in the audit trail as the API route. The owners team is
// offered for no deletion, and a post anyway is refused with the reason.
func TestTeamFormsCreateMembersDelete(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	_, m := e.UserClient(t, "acme", "dev@acme.test")
	owner, err := e.Client.Users.ReadCurrent(ctx)
	if err != nil {
		t.Fatal(err)
	}
	devName := m.User.Username
	if devName == "" {
		devName = "dev"
	}
	if devName == owner.Username {
		t.Fatalf("the member and the owner share the username %q", devName)
	}
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/teams"

	tb.open(page)
	if tb.exists(`tr[data-team="owners"] form.delete-team`) {
		t.Error("the owners team is offered for deletion")
	}
	if got := tb.text(`tr[data-team="owners"] .members`); !strings.Contains(got, owner.Username) {
		t.Errorf("the owners team's members read %q, want the owner %s", got, owner.Username)
	}
	tb.press("#new-team-details summary")
	fillForm(tb, "#new-team", map[string]string{"name": "ops", "visibility": "organization"})
	tick(tb, "#new-team", "access", "manage-workspaces")
	tb.press("#new-team button")
	tb.waitJS(`document.querySelector('tr[data-team="ops"]')`, "showed the new team")
	ops := teamNamed(t, e, "acme", "ops")
	if ops == nil || ops.Visibility != "organization" || ops.OrganizationAccess == nil || !ops.OrganizationAccess.ManageWorkspaces || ops.OrganizationAccess.ManagePolicies {
		t.Fatalf("the team made through the page: %+v (access %+v)", ops, ops.OrganizationAccess)
	}
	if got := tb.text(`tr[data-team="ops"] .access`); got != "manage workspaces" {
		t.Errorf("the new team's access reads %q", got)
	}
	wantPageEvent(t, e, "team", "create", ops.ID, http.StatusCreated)

	// A member by username.
	row := `tr[data-team="ops"]`
	fillForm(tb, row+" form.add-member", map[string]string{"username": devName})
	tb.press(row + " form.add-member button")
	tb.waitJS(`document.querySelector('tr[data-team="ops"] li[data-member="`+devName+`"]')`, "listed the new member")
	if got := teamUsers(t, e, ops.ID); len(got) != 1 || got[0] != devName {
		t.Fatalf("the team's members after adding %s: %v", devName, got)
	}
	wantPageEvent(t, e, "team", "add-users", ops.ID, http.StatusNoContent)
	tb.screenshot("member-added")

	tb.press(row + ` li[data-member="` + devName + `"] form.remove-member button`)
	tb.waitJS(`location.pathname === "/app/acme/teams" && document.readyState === "complete" && !document.querySelector('tr[data-team="ops"] li[data-member="`+devName+`"]')`, "left out the removed member")
	if got := teamUsers(t, e, ops.ID); len(got) != 0 {
		t.Fatalf("the team's members after removing %s: %v", devName, got)
	}
	wantPageEvent(t, e, "team", "remove-users", ops.ID, http.StatusNoContent)

	// The owners team, posted anyway: refused with the reason, kept.
	owners := teamNamed(t, e, "acme", "owners")
	if st, body := postPage(tb, "/app/acme/teams/"+owners.ID+"/delete"); st != http.StatusUnprocessableEntity || !strings.Contains(between(body, `data-refused-team="owners"`, "</tr>"), "the owners team cannot be deleted") {
		t.Errorf("deleting the owners team: %d %q", st, between(body, `role="alert">`, "<"))
	}
	if teamNamed(t, e, "acme", "owners") == nil {
		t.Fatal("the owners team is gone")
	}

	tb.press(row + " form.delete-team button")
	tb.waitJS(`location.pathname === "/app/acme/teams" && document.readyState === "complete" && !document.querySelector('tr[data-team="ops"]')`, "left out the deleted team")
	if _, err := e.Client.Teams.Read(ctx, ops.ID); !errors.Is(err, tfe.ErrResourceNotFound) {
		t.Fatalf("the deleted team reads: %v", err)
	}
	wantPageEvent(t, e, "team", "delete", ops.ID, http.StatusNoContent)
}

// A refused team form keeps what was typed and shows why: a taken name
// and organization access the service refuses in the new team form (its
// visibility and ticks kept), an unknown username in a team's add member
// form (in that team's row only).
func TestTeamFormsKeepWhatWasTyped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ops, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page, form = "/app/acme/teams", "#new-team"

	for _, tc := range []struct {
		name   string
		access []string
		want   string
	}{
		{"ops", []string{"manage-policies"}, `name "ops" has already been taken`},
		{"leads", []string{"manage-teams"}, "manage-teams requires manage-membership"},
	} {
		tb.open(page)
		tb.press("#new-team-details summary")
		fillForm(tb, form, map[string]string{"name": tc.name, "visibility": "organization"})
		for _, a := range tc.access {
			tick(tb, form, "access", a)
		}
		tb.press(form + " button")
		if got := tb.text("#new-team-error"); !strings.Contains(got, tc.want) {
			t.Fatalf("the refusal of team %s reads %q, want %q", tc.name, got, tc.want)
		}
		if !isOpen(tb, "#new-team-details") {
			t.Errorf("the new team form is closed after the refusal of %s", tc.name)
		}
		if got := fieldValue(tb, form, "name"); got != tc.name {
			t.Errorf("the refused form's name: %q, want %q", got, tc.name)
		}
		if got := fieldValue(tb, form, "visibility"); got != "organization" {
			t.Errorf("the refused form's visibility: %q", got)
		}
		if got := ticked(tb, form, "access"); strings.Join(got, ",") != strings.Join(tc.access, ",") {
			t.Errorf("the refused form's access ticked: %v, want %v", got, tc.access)
		}
	}
	tb.screenshot("new-refused")
	if teamNamed(t, e, "acme", "leads") != nil {
		t.Fatal("a refused form made a team")
	}
	if got, err := e.Client.Teams.Read(ctx, ops.ID); err != nil || got.OrganizationAccess.ManagePolicies {
		t.Fatalf("the taken name's team changed: %+v %v", got, err)
	}

	// An unknown username, in the team's row.
	row := `tr[data-team="ops"]`
	tb.open(page)
	fillForm(tb, row+" form.add-member", map[string]string{"username": "nobody"})
	tb.press(row + " form.add-member button")
	if got := tb.text(`tr[data-refused-team="ops"] [role=alert]`); !strings.Contains(got, `user "nobody" is not a member of organization "acme"`) {
		t.Fatalf("the refusal of an unknown username reads %q", got)
	}
	if got := fieldValue(tb, row+" form.add-member", "username"); got != "nobody" {
		t.Errorf("the refused add member form's username: %q", got)
	}
	if got := fieldValue(tb, `tr[data-team="owners"] form.add-member`, "username"); got != "" {
		t.Errorf("the owners team's add member form holds %q typed for ops", got)
	}
	if tb.exists("#new-team-error") {
		t.Error("the add member refusal shows in the new team form")
	}
	if got := teamUsers(t, e, ops.ID); len(got) != 0 {
		t.Fatalf("the refused member is in the team: %v", got)
	}
}

// A team's edit form renames it, changes its visibility, its members'
// token management and its organization access (unticking takes access
// away), each as the API then reads it and recorded as the API's update;
// a taken name is refused in the row, the form open with what was typed,
// the team unchanged. Who may manage teams without giving organization
// access gets no access choices, and a post carrying some changes none;
// a member who may not manage teams gets no form and a post is refused.
// The owners team has no edit form.
func TestTeamEditForm(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	ops, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	const page = "/app/acme/teams"
	row := `tr[data-team="ops"]`

	tb.open(page)
	if tb.exists(`tr[data-team="owners"] .edit-team`) {
		t.Error("the owners team has an edit form")
	}
	tb.press(row + " .edit-team summary")
	form := row + " form.edit-team-form"
	if got := ticked(tb, form, "access"); strings.Join(got, ",") != "manage-workspaces" {
		t.Fatalf("the edit form ticks %v, want the team's manage-workspaces", got)
	}
	if !checked(tb, form, "member_tokens") {
		t.Error("the edit form does not show members managing the token (the default)")
	}
	fillForm(tb, form, map[string]string{"name": "platform-ops", "visibility": "secret"})
	must(tb, chromedp.Evaluate[bool](`(function(){var f=document.querySelector(`+jsString(form)+`);f.elements["member_tokens"].checked=false;f.querySelector('input[value="manage-workspaces"]').checked=false;return true})()`))
	tick(tb, form, "access", "manage-policies")
	tb.press(form + " button")
	tb.waitJS(`document.querySelector('tr[data-team="platform-ops"]')`, "showed the renamed team")
	got, err := e.Client.Teams.Read(ctx, ops.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "platform-ops" || got.Visibility != "secret" || got.AllowMemberTokenManagement ||
		got.OrganizationAccess.ManageWorkspaces || !got.OrganizationAccess.ManagePolicies {
		t.Fatalf("after the edit the API reads %+v, access %+v", got, got.OrganizationAccess)
	}
	wantPageEvent(t, e, "team", "update", ops.ID, http.StatusOK)

	// A taken name: refused in the row, the form open and as typed.
	row = `tr[data-team="platform-ops"]`
	form = row + " form.edit-team-form"
	tb.press(row + " .edit-team summary")
	fillForm(tb, form, map[string]string{"name": "owners"})
	tb.press(form + " button")
	if msg := tb.text(`tr[data-refused-team="platform-ops"] [role=alert]`); !strings.Contains(msg, "already been taken") {
		t.Fatalf("the refusal of a taken name reads %q", msg)
	}
	if !isOpen(tb, row+" .edit-team") || fieldValue(tb, form, "name") != "owners" {
		t.Errorf("the refused edit form: open %v, name %q", isOpen(tb, row+" .edit-team"), fieldValue(tb, form, "name"))
	}
	if got, err := e.Client.Teams.Read(ctx, ops.ID); err != nil || got.Name != "platform-ops" {
		t.Fatalf("the refused edit changed the team: %+v %v", got, err)
	}

	// Managing teams without manage-organization-access: no access
	// choices, and a forged post changes no access.
	leads, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("leads"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageTeams: tfe.Bool(true), ManageMembership: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	dev, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("dev"), Visibility: tfe.String("organization")})
	if err != nil {
		t.Fatal(err)
	}
	lead := newTab(t, e, userToken(t, e, "acme", "lead@acme.test", leads))
	lead.open(page)
	if !lead.exists(`tr[data-team="dev"] .edit-team`) || lead.exists(`tr[data-team="dev"] .edit-team input[name=access]`) {
		t.Fatal("a team manager without organization access should edit dev without access choices")
	}
	if lead.exists(`tr[data-team="dev"] .edit-team option[value=secret]`) {
		t.Error("a team manager without access to secret teams is offered a secret team")
	}
	if st := postFrom(lead, "/app/acme/teams/"+dev.ID, map[string]string{"name": "devs", "visibility": "organization", "access": "manage-policies"}); st != 0 {
		t.Fatalf("the lead's rename of dev: %d, want the redirect after a save (0 to a fetch that does not follow it)", st)
	}
	if got, err := e.Client.Teams.Read(ctx, dev.ID); err != nil || got.Name != "devs" || got.OrganizationAccess.ManagePolicies {
		t.Fatalf("after the lead's post dev reads %+v (access %+v) %v: want renamed, no access given", got, got.OrganizationAccess, err)
	}

	// A member who may not manage teams: no form, a post refused.
	member := newTab(t, e, userToken(t, e, "acme", "member@acme.test"))
	member.open(page)
	if member.exists(".edit-team") {
		t.Error("a member who may not manage teams is offered an edit form")
	}
	if st := postFrom(member, "/app/acme/teams/"+dev.ID, map[string]string{"name": "mine", "visibility": "organization"}); st != http.StatusForbidden && st != http.StatusNotFound {
		t.Errorf("a member's edit post: %d, want 403 or 404", st)
	}
	if got, err := e.Client.Teams.Read(ctx, dev.ID); err != nil || got.Name != "devs" {
		t.Fatalf("a member's refused post changed the team: %+v %v", got, err)
	}
}
