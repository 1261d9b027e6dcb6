package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// memberships lists org's memberships through the API, by email.
func memberships(t *testing.T, e *testenv.Env, org string) map[string]*tfe.OrganizationMembership {
	t.Helper()
	l, err := e.Client.OrganizationMemberships.List(context.Background(), org, &tfe.OrganizationMembershipListOptions{
		ListOptions: tfe.ListOptions{PageSize: 100}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tfe.OrganizationMembership{}
	for _, m := range l.Items {
		out[m.Email] = m
	}
	return out
}

// newTeam creates a team of org through the API, with the organization
// access given.
func newTeam(t *testing.T, e *testenv.Env, org, name string, access *tfe.OrganizationAccessOptions) *tfe.Team {
	t.Helper()
	tm, err := e.Client.Teams.Create(context.Background(), org, tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// tickTeam ticks the invite form's box of the team id.
func tickTeam(tb *tab, id string) {
	tb.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector('#invite-member input[name=team][value=%q]');if(!e)return false;e.checked=true;return true})()`, id)
	if !must(tb, chromedp.Evaluate[bool](js)) {
		tb.t.Fatalf("the invite form offers no team %s", id)
	}
}

// teamTicked reports whether the invite form's box of the team id is ticked.
func teamTicked(tb *tab, id string) bool {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector('#invite-member input[name=team][value=%q]:checked')`, id)))
}

// row is the selector of the members table's row of email.
func row(email string) string { return fmt.Sprintf(`#members tr[data-email=%q]`, email) }

// An owner invites a person by email into a team, who shows in the list
// (and in the API's) as invited, in the team; then removes them, and the
// API lists them no more.
func TestOrgMembersInviteAndRemove(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	dev := newTeam(t, e, "acme", "dev", nil)
	tb := ownerTab(t, e, "acme", "owner@acme.test")

	tb.open("/app/acme/settings")
	tb.press("#members-link")
	tb.waitLocation("/app/acme/settings/members")
	if got := tb.text(row("owner@acme.test") + " .status-cell"); !strings.Contains(got, "active") {
		t.Errorf("the owner's membership shows %q, want active", got)
	}
	fillForm(tb, "#invite-member", map[string]string{"email": "new@acme.test"})
	tickTeam(tb, dev.ID)
	tb.press("#invite")
	tb.waitLocation("invited=")
	if got := tb.text("#invited"); !strings.Contains(got, "new@acme.test") {
		t.Errorf("no word of the invitation: %q", got)
	}
	if got := tb.text(row("new@acme.test") + " .status-cell"); !strings.Contains(got, "invited") {
		t.Errorf("the new membership shows %q, want invited", got)
	}
	if got := tb.text(row("new@acme.test") + " .teams"); got != "dev" {
		t.Errorf("the new membership's teams show %q, want dev", got)
	}
	m := memberships(t, e, "acme")["new@acme.test"]
	if m == nil {
		t.Fatal("the API does not list the invited membership")
	}
	if m.Status != tfe.OrganizationMembershipInvited || len(m.Teams) != 1 || m.Teams[0].ID != dev.ID {
		t.Errorf("the API lists the membership %s with status %s and teams %v, want invited into %s", m.ID, m.Status, m.Teams, dev.ID)
	}
	wantPageEvent(t, e, "organization-membership", "create", m.ID, http.StatusCreated)

	tb.press(row("new@acme.test") + " form.remove button")
	tb.waitJS(`document.readyState === "complete" && location.pathname === "/app/acme/settings/members" && !document.querySelector('#members tr[data-email="new@acme.test"]')`,
		"left the removed member out of the list")
	if m := memberships(t, e, "acme")["new@acme.test"]; m != nil {
		t.Errorf("the API still lists the removed membership %s", m.ID)
	}
	wantPageEvent(t, e, "organization-membership", "delete", m.ID, http.StatusNoContent)
}

// A refused invitation (an address that is none, one already a member, no
// address) is shown in the form with the reason, with what was typed and
// ticked kept; no membership is made.
func TestOrgMembersInviteBadInputKept(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	dev := newTeam(t, e, "acme", "dev", nil)
	tb := ownerTab(t, e, "acme", "owner@acme.test")
	before := len(memberships(t, e, "acme"))
	for _, tc := range []struct{ email, want string }{
		{"not an address", "not a valid address"},
		{"owner@acme.test", "already a member"},
		{"", "email address is required"},
	} {
		tb.open("/app/acme/settings/members")
		fillForm(tb, "#invite-member", map[string]string{"email": tc.email})
		tickTeam(tb, dev.ID)
		tb.press("#invite")
		tb.waitText("#form-error", tc.want, time.Minute)
		if got := fieldValue(tb, "#invite-member", "email"); got != tc.email {
			t.Errorf("%q: the form lost the email: %q", tc.email, got)
		}
		if !teamTicked(tb, dev.ID) {
			t.Errorf("%q: the form lost the ticked team", tc.email)
		}
		if tb.exists("#invited") {
			t.Errorf("%q: a refused invitation is announced", tc.email)
		}
	}
	if st := postFrom(tb, "/app/acme/settings/members", map[string]string{"email": "Bob <bob@acme.test>"}); st != http.StatusUnprocessableEntity {
		t.Errorf("an address with a name answers %d, want 422", st)
	}
	if got := len(memberships(t, e, "acme")); got != before {
		t.Errorf("refused invitations made memberships: %d, had %d", got, before)
	}
}

// A member without manage-membership reads the list but is offered no
// invitation and no removal of others (only leaving), and their posts are
// refused, changing nothing. A member of a team with manage-membership
// invites and removes, but is not offered (and is refused) the removal of
// an owner, whose owners team only owners change.
func TestOrgMembersByPermission(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	userToken(t, e, "acme", "owner@acme.test", ownersTeam(t, e, "acme"))
	member := newTab(t, e, userToken(t, e, "acme", "member@acme.test"))
	managers := newTeam(t, e, "acme", "people", &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true)})
	manager := newTab(t, e, userToken(t, e, "acme", "hr@acme.test", managers))
	ms := memberships(t, e, "acme")

	if st := member.open("/app/acme/settings/members"); st != http.StatusOK {
		t.Fatalf("a member's members page: %d", st)
	}
	for _, email := range []string{"owner@acme.test", "hr@acme.test", "member@acme.test"} {
		if !member.exists(row(email)) {
			t.Errorf("a member does not see %s in the list", email)
		}
	}
	// The owners team is secret to a plain member: it is counted, not named.
	if got := member.text(row("owner@acme.test") + " .teams"); got != "1 team you cannot see" {
		t.Errorf("a member reads the owner's teams as %q, want them counted as unseen", got)
	}
	if member.exists("#invite-member") {
		t.Error("a member without manage-membership is offered the invite form")
	}
	for _, email := range []string{"owner@acme.test", "hr@acme.test"} {
		if member.exists(row(email) + " form.remove") {
			t.Errorf("a member without manage-membership is offered to remove %s", email)
		}
	}
	if got := member.text(row("member@acme.test") + " form.remove button"); got != "Leave" {
		t.Errorf("a member's own row offers %q, want Leave", got)
	}
	// The search narrows the list to usernames or emails that hold it.
	member.open("/app/acme/settings/members?q=HR%40")
	if !member.exists(row("hr@acme.test")) || member.exists(row("owner@acme.test")) || member.exists(row("member@acme.test")) {
		t.Errorf("searching hr@ lists %s", member.text("#members tbody"))
	}
	if st := postFrom(member, "/app/acme/settings/members", map[string]string{"email": "intruder@acme.test"}); st != http.StatusForbidden {
		t.Errorf("a member's invitation answers %d, want 403", st)
	}
	if st := postFrom(member, "/app/acme/settings/members/"+ms["hr@acme.test"].ID+"/delete", nil); st != http.StatusForbidden {
		t.Errorf("a member's removal of another answers %d, want 403", st)
	}
	after := memberships(t, e, "acme")
	if after["intruder@acme.test"] != nil || after["hr@acme.test"] == nil {
		t.Errorf("a refused member changed the memberships: %v", after)
	}

	manager.open("/app/acme/settings/members")
	if !manager.exists("#invite-member") {
		t.Error("a member with manage-membership is not offered the invite form")
	}
	if !manager.exists(row("member@acme.test") + " form.remove") {
		t.Error("a member with manage-membership is not offered to remove a plain member")
	}
	if manager.exists(row("owner@acme.test") + " form.remove") {
		t.Error("a member with manage-membership is offered to remove an owner")
	}
	if manager.exists(fmt.Sprintf(`#invite-member input[name=team][value=%q]`, ownersTeam(t, e, "acme").ID)) {
		t.Error("a member with manage-membership is offered to invite into the owners team")
	}
	if st := postFrom(manager, "/app/acme/settings/members/"+ms["owner@acme.test"].ID+"/delete", nil); st != http.StatusForbidden {
		t.Errorf("a manager's removal of an owner answers %d, want 403", st)
	}
	if memberships(t, e, "acme")["owner@acme.test"] == nil {
		t.Fatal("a refused removal removed the owner")
	}
	// The refusal, in place, says why.
	manager.open("/app/acme/settings/members")
	must(manager, chromedp.Evaluate[bool](fmt.Sprintf(`(function(){var f=document.createElement('form');f.method='post';f.action='/app/acme/settings/members/%s/delete';
		var i=document.createElement('input');i.name='csrf_token';i.value=document.querySelector('meta[name=csrf-token]').content;f.appendChild(i);document.body.appendChild(f);f.submit();return true})()`,
		ms["owner@acme.test"].ID)))
	manager.waitText("#remove-error", "insufficient permissions", time.Minute)

	manager.press(row("member@acme.test") + " form.remove button")
	manager.waitJS(`location.pathname === "/app/acme/settings/members" && document.readyState === "complete" && !document.querySelector('#members tr[data-email="member@acme.test"]')`,
		"left the removed member out of the list")
	if memberships(t, e, "acme")["member@acme.test"] != nil {
		t.Error("the manager's removal of a member did not remove them")
	}
}

// ownersTeam is org's owners team.
func ownersTeam(t *testing.T, e *testenv.Env, org string) *tfe.Team {
	t.Helper()
	owners, err := e.Client.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		t.Fatalf("the owners team: %v %v", owners, err)
	}
	return owners.Items[0]
}
