package team_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// memberToken makes email a member of org in teams and returns a user
// token of theirs.
func memberToken(t *testing.T, e *testenv.Env, org, email string, teams ...*tfe.Team) string {
	t.Helper()
	_, m := e.UserClient(t, org, email, teams...)
	_, secret, err := e.Server.Auth.CreateToken(context.Background(), e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

func newTeam(t *testing.T, c *tfe.Client, org, name, visibility string, access *tfe.OrganizationAccessOptions) *tfe.Team {
	t.Helper()
	tm, err := c.Teams.Create(context.Background(), org, tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String(visibility), OrganizationAccess: access})
	if err != nil {
		t.Fatalf("creating team %s: %v", name, err)
	}
	return tm
}

func ownersOf(t *testing.T, c *tfe.Client, org string) *tfe.Team {
	t.Helper()
	l, err := c.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the owners team of %s: %v", org, err)
	}
	return l.Items[0]
}

func invite(email string, teams ...*tfe.Team) map[string]any {
	var data []map[string]string
	for _, tm := range teams {
		data = append(data, map[string]string{"type": "teams", "id": tm.ID})
	}
	return map[string]any{"data": map[string]any{"type": "organization-memberships", "attributes": map[string]any{"email": email},
		"relationships": map[string]any{"teams": map[string]any{"data": data}}}}
}

func addUsers(names ...string) map[string]any {
	var data []map[string]string
	for _, n := range names {
		data = append(data, map[string]string{"type": "users", "id": n})
	}
	return map[string]any{"data": data}
}

// TestInvitingIntoATeamIsAddingToIt: a holder of manage-membership invites
// people only into teams whose members it may change: not into a secret
// team it cannot see (404, as adding to it), and never into the owners
// team, which only owners fill (403 once it is visible, as adding to it).
// Nothing is invited when a team is refused.
func TestInvitingIntoATeamIsAddingToIt(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		owners := ownersOf(t, c, "acme")
		hidden := newTeam(t, c, "acme", "hidden", "secret", nil)
		devs := newTeam(t, c, "acme", "devs", "organization", nil)
		people := newTeam(t, c, "acme", "people", "organization", &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true)})
		hr := memberToken(t, e, "acme", "hr@acme.test", people)
		path := "/api/v2/organizations/acme/organization-memberships"

		n := 0
		refused := func(what string, want int, teams ...*tfe.Team) {
			t.Helper()
			n++
			email := fmt.Sprintf("x%d@acme.test", n)
			if st, body := e.API(t, hr, "POST", path, invite(email, teams...)); st != want {
				t.Errorf("%s: status %d (%s), want %d", what, st, body, want)
			}
			l, err := c.OrganizationMemberships.List(ctx, "acme", &tfe.OrganizationMembershipListOptions{Emails: []string{email}})
			if err != nil || len(l.Items) != 0 {
				t.Errorf("%s: a refused invitation left %d memberships (%v)", what, len(l.Items), err)
			}
		}
		// The owners team is secret: as adding to it, inviting into it
		// finds no team.
		if st, body := e.API(t, hr, "POST", "/api/v2/teams/"+owners.ID+"/relationships/users", addUsers("hr")); st != http.StatusNotFound {
			t.Fatalf("adding to the owners team: status %d (%s), want 404", st, body)
		}
		refused("inviting into the owners team", http.StatusNotFound, owners)
		refused("inviting into a secret team", http.StatusNotFound, hidden)
		refused("inviting into a visible team and the owners team", http.StatusNotFound, devs, owners)

		// Visible, the owners team is still the owners' to fill.
		if _, err := c.Teams.Update(ctx, owners.ID, tfe.TeamUpdateOptions{Visibility: tfe.String("organization")}); err != nil {
			t.Fatal(err)
		}
		if st, body := e.API(t, hr, "POST", "/api/v2/teams/"+owners.ID+"/relationships/users", addUsers("hr")); st != http.StatusForbidden {
			t.Errorf("adding to the visible owners team: status %d (%s), want 403", st, body)
		}
		refused("inviting into the visible owners team", http.StatusForbidden, owners)
		if p := teamPermissions(t, e, hr, owners.ID); p["can-update-membership"] {
			t.Errorf("the owners team shows manage-membership %v, want can-update-membership false", p)
		}

		// Into a team it sees, a holder of manage-membership invites; the
		// owners invite into the owners team.
		if st, body := e.API(t, hr, "POST", path, invite("dev@acme.test", devs)); st != http.StatusCreated {
			t.Fatalf("inviting into a visible team: status %d (%s), want 201", st, body)
		}
		if p := teamPermissions(t, e, hr, devs.ID); !p["can-update-membership"] {
			t.Errorf("a visible team shows %v, want can-update-membership", p)
		}
		m, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("boss@acme.test"), Teams: []*tfe.Team{owners}})
		if err != nil || len(m.Teams) != 1 || m.Teams[0].ID != owners.ID {
			t.Fatalf("an owner inviting into the owners team: %+v %v", m, err)
		}
	})
}

// teamPermissions reads a team's permissions as token.
func teamPermissions(t *testing.T, e *testenv.Env, token, id string) map[string]bool {
	t.Helper()
	var got struct {
		Data struct {
			Attributes struct {
				Permissions map[string]bool `json:"permissions"`
			} `json:"attributes"`
		} `json:"data"`
	}
	st, body := e.API(t, token, "GET", "/api/v2/teams/"+id, nil)
	if err := json.Unmarshal(body, &got); st != http.StatusOK || err != nil {
		t.Fatalf("reading team %s: status %d (%s) %v", id, st, body, err)
	}
	return got.Data.Attributes.Permissions
}

func teamUpdate(attrs map[string]any) map[string]any {
	return map[string]any{"data": map[string]any{"type": "teams", "attributes": attrs}}
}

// TestOrganizationAccessNeedsManageOrganizationAccess: manage-teams
// changes teams, but not their organization access, its own team's
// included, nor gives a new team any: that is manage-organization-access
// (which HCP Terraform lets change any visible team's access but the
// owners team's). The teams' permissions say so.
func TestOrganizationAccessNeedsManageOrganizationAccess(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		owners := ownersOf(t, c, "acme")
		teamsAccess := &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true), ManageTeams: tfe.Bool(true)}
		admins := newTeam(t, c, "acme", "team-admins", "organization", teamsAccess)
		ta := memberToken(t, e, "acme", "ta@acme.test", admins)
		devs := newTeam(t, c, "acme", "devs", "organization", nil)
		grant := teamUpdate(map[string]any{"organization-access": map[string]any{"manage-workspaces": true}})

		for _, tm := range []*tfe.Team{admins, devs} {
			if st, body := e.API(t, ta, "PATCH", "/api/v2/teams/"+tm.ID, grant); st != http.StatusForbidden {
				t.Errorf("manage-teams giving team %s manage-workspaces: status %d (%s), want 403", tm.Name, st, body)
			}
			// Nor make it secret: that needs access-secret-teams
			// (TestSecretTeamsNeedAccessSecretTeams).
			p := teamPermissions(t, e, ta, tm.ID)
			if p["can-update-organization-access"] || !p["can-update-name"] || !p["can-destroy"] || !p["can-update-membership"] || p["can-update-visibility"] {
				t.Errorf("manage-teams sees team %s's permissions %v", tm.Name, p)
			}
		}
		if got, err := c.Teams.Read(ctx, admins.ID); err != nil || got.OrganizationAccess.ManageWorkspaces {
			t.Fatalf("team-admins after the refusal: %+v %v", got, err)
		}
		create := map[string]any{"data": map[string]any{"type": "teams", "attributes": map[string]any{"name": "escalated",
			"visibility": "organization", "organization-access": map[string]any{"manage-workspaces": true}}}}
		if st, body := e.API(t, ta, "POST", "/api/v2/organizations/acme/teams", create); st != http.StatusForbidden {
			t.Errorf("manage-teams creating a team with manage-workspaces: status %d (%s), want 403", st, body)
		}
		// What manage-teams does do: rename a team, create one without
		// organization access, send the access it already has unchanged.
		if st, body := e.API(t, ta, "PATCH", "/api/v2/teams/"+devs.ID, teamUpdate(map[string]any{"name": "developers",
			"organization-access": map[string]any{"manage-workspaces": false}})); st != http.StatusOK {
			t.Errorf("manage-teams renaming a team: status %d (%s), want 200", st, body)
		}
		if st, body := e.API(t, ta, "POST", "/api/v2/organizations/acme/teams", teamUpdate(map[string]any{"name": "plain", "visibility": "organization"})); st != http.StatusCreated {
			t.Errorf("manage-teams creating a team: status %d (%s), want 201", st, body)
		}

		// manage-organization-access changes visible teams' access, its
		// own team's too, and creates teams with access; not the owners
		// team's, nor anything of the owners team.
		orgAccess := &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true), ManageTeams: tfe.Bool(true), ManageOrganizationAccess: tfe.Bool(true)}
		access := newTeam(t, c, "acme", "access-admins", "organization", orgAccess)
		oa := memberToken(t, e, "acme", "oa@acme.test", access)
		if p := teamPermissions(t, e, oa, devs.ID); !p["can-update-organization-access"] {
			t.Errorf("manage-organization-access sees devs' permissions %v", p)
		}
		if st, body := e.API(t, oa, "PATCH", "/api/v2/teams/"+devs.ID, grant); st != http.StatusOK {
			t.Errorf("manage-organization-access giving devs manage-workspaces: status %d (%s), want 200", st, body)
		}
		if got, err := c.Teams.Read(ctx, devs.ID); err != nil || !got.OrganizationAccess.ManageWorkspaces {
			t.Fatalf("devs after the change: %+v %v", got, err)
		}
		if st, body := e.API(t, oa, "POST", "/api/v2/organizations/acme/teams", create); st != http.StatusCreated {
			t.Errorf("manage-organization-access creating a team with manage-workspaces: status %d (%s), want 201", st, body)
		}
		if _, err := c.Teams.Update(ctx, owners.ID, tfe.TeamUpdateOptions{Visibility: tfe.String("organization")}); err != nil {
			t.Fatal(err)
		}
		p := teamPermissions(t, e, oa, owners.ID)
		for k, v := range p {
			if v && k != "can-view-api-token" && k != "can-update-api-token" {
				t.Errorf("manage-organization-access sees the owners team's %s", k)
			}
		}
		if p["can-view-api-token"] || p["can-update-api-token"] {
			t.Errorf("a non-owner may manage the owners team's tokens: %v", p)
		}
		if st, body := e.API(t, oa, "PATCH", "/api/v2/teams/"+owners.ID, teamUpdate(map[string]any{"visibility": "secret"})); st != http.StatusForbidden {
			t.Errorf("manage-organization-access changing the owners team: status %d (%s), want 403", st, body)
		}
		if st, body := e.API(t, oa, "DELETE", "/api/v2/teams/"+owners.ID, nil); st != http.StatusForbidden {
			t.Errorf("manage-organization-access deleting the owners team: status %d (%s), want 403", st, body)
		}
		// The owners keep all of it but what no one may do.
		p = teamPermissions(t, e, "", owners.ID)
		if !p["can-update-membership"] || !p["can-update-visibility"] || p["can-update-organization-access"] || p["can-destroy"] || p["can-update-name"] {
			t.Errorf("the site admin sees the owners team's permissions %v", p)
		}
	})
}

// TestInvitedActOnlyOnceAccepted: as in HCP Terraform, an invited person
// joins the organization, and the teams named in the invitation, when
// accepting it: until then a token of theirs (a user who already had an
// account) reaches nothing of the organization, an invitation into the
// owners team makes no owner (nor counts as one when the last owner
// leaves), and the person may only read and decline the invitation.
func TestInvitedActOnlyOnceAccepted(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "globex")
		owners := ownersOf(t, c, "acme")
		// An existing user (a member elsewhere) with a token.
		token := memberToken(t, e, "globex", "eve@example.test")
		m, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("eve@example.test"), Teams: []*tfe.Team{owners}})
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != tfe.OrganizationMembershipInvited {
			t.Fatalf("the membership is %s, want invited", m.Status)
		}
		newTeam := map[string]any{"data": map[string]any{"type": "teams", "attributes": map[string]any{"name": "eves"}}}
		for _, rq := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/api/v2/organizations/acme", nil},
			{"GET", "/api/v2/organizations/acme/workspaces", nil},
			{"GET", "/api/v2/teams/" + owners.ID, nil},
			{"POST", "/api/v2/organizations/acme/teams", newTeam},
		} {
			if st, body := e.API(t, token, rq.method, rq.path, rq.body); st != http.StatusNotFound {
				t.Errorf("invited, %s %s: status %d (%s), want 404", rq.method, rq.path, st, body)
			}
		}
		if st, body := e.API(t, token, "GET", "/api/v2/organization-memberships/"+m.ID, nil); st != http.StatusOK {
			t.Errorf("invited, reading the invitation: status %d (%s), want 200", st, body)
		}
		// The invited owner is no owner: the organization's one owner
		// may not leave the owners team to them.
		me, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = c.TeamMembers.Remove(ctx, owners.ID, tfe.TeamMemberRemoveOptions{Usernames: []string{me.Username}})
		testenv.WantStatus(t, "the last owner leaving to an invited one", err, "at least one owner")

		// Accepted, the invitation makes an owner.
		e.Accept(t, m.ID)
		if st, body := e.API(t, token, "POST", "/api/v2/organizations/acme/teams", newTeam); st != http.StatusCreated {
			t.Errorf("accepted, creating a team: status %d (%s), want 201", st, body)
		}

		// An invitation may be declined by its person.
		m2, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("mallory@globex.test")})
		if err != nil {
			t.Fatal(err)
		}
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m2.User.ID})
		if err != nil {
			t.Fatal(err)
		}
		if st, body := e.API(t, secret, "DELETE", "/api/v2/organization-memberships/"+m2.ID, nil); st != http.StatusNoContent {
			t.Errorf("declining an invitation: status %d (%s), want 204", st, body)
		}
	})
}

// TestAddingByUsernameNeedsMembership: a team takes by username only
// members of its organization, as HCP Terraform (they are invited first).
// Adding anyone else used to make them an active member at once, with no
// invitation, and told the caller which usernames exist on the instance.
func TestAddingByUsernameNeedsMembership(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "other")
		devs := newTeam(t, c, "acme", "devs", "organization", nil)
		outsider, om := e.UserClient(t, "other", "outsider@other.test")
		name := om.User.Username
		path := "/api/v2/teams/" + devs.ID + "/relationships/users"

		st, body := e.API(t, "", "POST", path, addUsers(name))
		st2, body2 := e.API(t, "", "POST", path, addUsers("nobody-at-all"))
		if st != http.StatusNotFound || st2 != http.StatusNotFound {
			t.Fatalf("adding a non-member: %d %s; adding an unknown user: %d %s; want 404 for both", st, body, st2, body2)
		}
		if _, err := outsider.Organizations.Read(ctx, "acme"); err == nil {
			t.Fatal("the outsider became a member of acme by being added to a team")
		}
		if got := teamUsers(t, c, devs.ID); len(got) != 0 {
			t.Fatalf("devs' members after refused adds: %v", got)
		}

		// Invited, they may be added; they act once they accept.
		m, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("outsider@other.test")})
		if err != nil {
			t.Fatal(err)
		}
		if st, body := e.API(t, "", "POST", path, addUsers(name)); st != http.StatusNoContent {
			t.Fatalf("adding an invited member: %d %s", st, body)
		}
		if got := teamUsers(t, c, devs.ID); len(got) != 1 || got[0] != name {
			t.Fatalf("devs' members: %v, want [%s]", got, name)
		}
		if _, err := outsider.Organizations.Read(ctx, "acme"); err == nil {
			t.Fatal("the outsider acts in acme before accepting the invitation")
		}
		e.Accept(t, m.ID)
		if _, err := outsider.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("the outsider, having accepted: %v", err)
		}
	})
}

func teamUsers(t *testing.T, c *tfe.Client, teamID string) []string {
	t.Helper()
	users, err := c.TeamMembers.List(context.Background(), teamID)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, u := range users {
		names = append(names, u.Username)
	}
	return names
}

// TestSecretTeamsNeedAccessSecretTeams: as HCP Terraform documents it,
// manage-teams "on its own" neither creates secret teams (a new team is
// secret unless given visibility "organization") nor makes a team secret,
// nor changes or deletes one, even one its holder is in and so sees; with
// access-secret-teams ("include secret teams") it does all of it, and the
// creator of a secret team sees and manages it. The teams' permissions
// say what is enforced, for a member and for a team token alike.
func TestSecretTeamsNeedAccessSecretTeams(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		manage := &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true), ManageTeams: tfe.Bool(true)}
		admins := newTeam(t, c, "acme", "team-admins", "organization", manage)
		ta := memberToken(t, e, "acme", "ta@acme.test", admins)
		tok, err := c.TeamTokens.Create(ctx, admins.ID)
		if err != nil {
			t.Fatal(err)
		}
		devs := newTeam(t, c, "acme", "devs", "organization", nil)
		// ta is in the secret team ops, and so sees it.
		ops := newTeam(t, c, "acme", "ops", "secret", nil)
		if err := c.TeamMembers.Add(ctx, ops.ID, tfe.TeamMemberAddOptions{Usernames: []string{"ta"}}); err != nil {
			t.Fatal(err)
		}
		create := func(attrs map[string]any) map[string]any {
			return map[string]any{"data": map[string]any{"type": "teams", "attributes": attrs}}
		}
		want := func(what string, got int, body []byte, status int) {
			t.Helper()
			if got != status {
				t.Errorf("%s: status %d (%s), want %d", what, got, body, status)
			}
		}

		for who, token := range map[string]string{"a member": ta, "the team's token": tok.Token} {
			st, body := e.API(t, token, "POST", "/api/v2/organizations/acme/teams", create(map[string]any{"name": "hush", "visibility": "secret"}))
			want("manage-teams creating a secret team, as "+who, st, body, http.StatusForbidden)
			st, body = e.API(t, token, "POST", "/api/v2/organizations/acme/teams", create(map[string]any{"name": "hush"}))
			want("manage-teams creating a team secret by default, as "+who, st, body, http.StatusForbidden)
			if !strings.Contains(string(body), `unless its visibility is \"organization\"`) {
				t.Errorf("the refusal of a default secret team says %s", body)
			}
			st, body = e.API(t, token, "PATCH", "/api/v2/teams/"+devs.ID, teamUpdate(map[string]any{"visibility": "secret"}))
			want("manage-teams making a team secret, as "+who, st, body, http.StatusForbidden)
		}
		if l, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"hush"}}); err != nil || len(l.Items) != 0 {
			t.Fatalf("the refused secret team exists: %v %v", l, err)
		}
		if got, err := c.Teams.Read(ctx, devs.ID); err != nil || got.Visibility != "organization" {
			t.Fatalf("devs after the refusal: %+v %v", got, err)
		}
		st, body := e.API(t, ta, "POST", "/api/v2/organizations/acme/teams", create(map[string]any{"name": "open", "visibility": "organization"}))
		want("manage-teams creating a visible team", st, body, http.StatusCreated)

		// In a secret team, manage-teams sees it but changes nothing of it.
		if p := teamPermissions(t, e, ta, ops.ID); p["can-update-name"] || p["can-destroy"] || p["can-update-visibility"] || p["can-update-sso-team-id"] {
			t.Errorf("manage-teams in a secret team sees its permissions %v", p)
		}
		st, body = e.API(t, ta, "PATCH", "/api/v2/teams/"+ops.ID, teamUpdate(map[string]any{"name": "ops2"}))
		want("manage-teams renaming a secret team it is in", st, body, http.StatusForbidden)
		st, body = e.API(t, ta, "PATCH", "/api/v2/teams/"+ops.ID, teamUpdate(map[string]any{"visibility": "organization"}))
		want("manage-teams making a secret team it is in visible", st, body, http.StatusForbidden)
		st, body = e.API(t, ta, "DELETE", "/api/v2/teams/"+ops.ID, nil)
		want("manage-teams deleting a secret team it is in", st, body, http.StatusForbidden)
		if got, err := c.Teams.Read(ctx, ops.ID); err != nil || got.Name != "ops" || got.Visibility != "secret" {
			t.Fatalf("ops after the refusals: %+v %v", got, err)
		}

		// With access-secret-teams: created, seen, changed, deleted.
		secretAccess := &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true), ManageTeams: tfe.Bool(true), AccessSecretTeams: tfe.Bool(true)}
		keepers := newTeam(t, c, "acme", "keepers", "organization", secretAccess)
		sa := memberToken(t, e, "acme", "sa@acme.test", keepers)
		if p := teamPermissions(t, e, sa, devs.ID); !p["can-update-visibility"] {
			t.Errorf("access-secret-teams sees devs' permissions %v", p)
		}
		st, body = e.API(t, sa, "POST", "/api/v2/organizations/acme/teams", create(map[string]any{"name": "hush"}))
		want("access-secret-teams creating a secret team", st, body, http.StatusCreated)
		var created struct {
			Data struct {
				ID         string `json:"id"`
				Attributes struct {
					Visibility string `json:"visibility"`
				} `json:"attributes"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &created); err != nil || created.Data.Attributes.Visibility != "secret" {
			t.Fatalf("the created team: %s %v", body, err)
		}
		hush := created.Data.ID
		if p := teamPermissions(t, e, sa, hush); !p["can-update-name"] || !p["can-destroy"] || !p["can-update-visibility"] {
			t.Errorf("the creator of a secret team sees its permissions %v", p)
		}
		st, body = e.API(t, sa, "PATCH", "/api/v2/teams/"+devs.ID, teamUpdate(map[string]any{"visibility": "secret"}))
		want("access-secret-teams making a team secret", st, body, http.StatusOK)
		st, body = e.API(t, sa, "PATCH", "/api/v2/teams/"+ops.ID, teamUpdate(map[string]any{"name": "ops2"}))
		want("access-secret-teams renaming a secret team", st, body, http.StatusOK)
		st, body = e.API(t, sa, "DELETE", "/api/v2/teams/"+hush, nil)
		want("access-secret-teams deleting the secret team it created", st, body, http.StatusNoContent)
	})
}
