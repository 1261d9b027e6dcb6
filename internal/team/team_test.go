package team_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestTeams(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")

		list, err := c.Teams.List(ctx, "acme", nil)
		if err != nil || len(list.Items) != 1 || list.Items[0].Name != "owners" {
			t.Fatalf("a new organization should have only the owners team: %+v %v", list, err)
		}
		owners := list.Items[0]
		if owners.UserCount != 1 || owners.Permissions.CanDestroy || !owners.OrganizationAccess.ManageTeams {
			t.Fatalf("owners team: %+v %+v %+v", owners, owners.Permissions, owners.OrganizationAccess)
		}

		dev, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{
			Name:               tfe.String("dev"),
			OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if dev.Visibility != "secret" || !dev.AllowMemberTokenManagement || !dev.OrganizationAccess.ManageWorkspaces || dev.OrganizationAccess.ManagePolicies || !dev.Permissions.CanDestroy {
			t.Fatalf("defaults: %+v access %+v", dev, dev.OrganizationAccess)
		}
		if _, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("dev")}); err == nil {
			t.Fatal("a second team named dev was created")
		}
		_, err = c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("x"), Visibility: tfe.String("public")})
		testenv.WantStatus(t, "bad visibility", err, "visibility")
		_, err = c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("x"), OrganizationAccess: &tfe.OrganizationAccessOptions{ManageTeams: tfe.Bool(true)}})
		testenv.WantStatus(t, "manage-teams without manage-membership", err, "manage-membership")
		_, err = c.Teams.Create(ctx, "nope", tfe.TeamCreateOptions{Name: tfe.String("x")})
		testenv.WantErr(t, "team in a missing organization", err, tfe.ErrResourceNotFound)

		// Filters.
		if _, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops")}); err != nil {
			t.Fatal(err)
		}
		got, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"dev", "ops"}})
		if err != nil || len(got.Items) != 2 {
			t.Fatalf("filter[names]: %+v %v", got, err)
		}
		got, err = c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Query: "DE"})
		if err != nil || len(got.Items) != 1 || got.Items[0].ID != dev.ID {
			t.Fatalf("q: %+v %v", got, err)
		}

		// Update keeps what is not given.
		up, err := c.Teams.Update(ctx, dev.ID, tfe.TeamUpdateOptions{Name: tfe.String("developers"), Visibility: tfe.String("organization")})
		if err != nil || up.Name != "developers" || up.Visibility != "organization" || !up.OrganizationAccess.ManageWorkspaces {
			t.Fatalf("update: %+v %v", up, err)
		}

		// The owners team stays.
		_, err = c.Teams.Update(ctx, owners.ID, tfe.TeamUpdateOptions{Name: tfe.String("bosses")})
		testenv.WantStatus(t, "renaming owners", err, "cannot be renamed")
		err = c.Teams.Delete(ctx, owners.ID)
		testenv.WantStatus(t, "deleting owners", err, "cannot be deleted")
		me, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		err = c.TeamMembers.Remove(ctx, owners.ID, tfe.TeamMemberRemoveOptions{Usernames: []string{me.Username}})
		testenv.WantStatus(t, "removing the last owner", err, "at least one owner")

		// Malformed and unknown IDs are 404s.
		_, err = c.Teams.Read(ctx, "nonexisting")
		testenv.WantErr(t, "malformed team id", err, tfe.ErrResourceNotFound)
		_, err = c.Teams.Read(ctx, "team-doesnotexist123")
		testenv.WantErr(t, "unknown team id", err, tfe.ErrResourceNotFound)

		if err := c.Teams.Delete(ctx, dev.ID); err != nil {
			t.Fatal(err)
		}
		_, err = c.Teams.Read(ctx, dev.ID)
		testenv.WantErr(t, "deleted team", err, tfe.ErrResourceNotFound)

		// Everything survives a restart.
		e = e.Restart(t)
		got, err = e.Client.Teams.List(ctx, "acme", nil)
		if err != nil || len(got.Items) != 2 {
			t.Fatalf("after restart: %+v %v", got, err)
		}
	})
}

func TestMembersAndMemberships(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "other")
		dev, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("dev")})
		if err != nil {
			t.Fatal(err)
		}
		secret, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("secret-squad")})
		if err != nil {
			t.Fatal(err)
		}

		bob, bobMem := e.UserClient(t, "acme", "bob@example.test", dev)
		if bobMem.Status != tfe.OrganizationMembershipInvited || bobMem.Email != "bob@example.test" || bobMem.User.Username != "bob" || len(bobMem.Teams) != 1 {
			t.Fatalf("membership: %+v user %+v", bobMem, bobMem.User)
		}

		// A member sees the organization and its own teams, not secret ones,
		// and may not manage teams.
		if _, err := bob.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("member reading its organization: %v", err)
		}
		_, err = bob.Organizations.Read(ctx, "other")
		testenv.WantErr(t, "member reading another organization", err, tfe.ErrResourceNotFound)
		// Organization lists: a member's are its own, counted as such; the
		// site admin's are all, filtered by q (LIKE's "_" is itself).
		if l, err := bob.Organizations.List(ctx, nil); err != nil || l.TotalCount != 1 || len(l.Items) != 1 || l.Items[0].Name != "acme" {
			t.Fatalf("bob lists organizations %+v (%v), want acme alone", l, err)
		}
		if l, err := c.Organizations.List(ctx, &tfe.OrganizationListOptions{Query: "ACM"}); err != nil || l.TotalCount != 1 || l.Items[0].Name != "acme" {
			t.Fatalf("q=ACM lists %+v (%v), want acme alone", l, err)
		}
		if l, err := c.Organizations.List(ctx, &tfe.OrganizationListOptions{Query: "_"}); err != nil || l.TotalCount != 0 {
			t.Fatalf("q=_ lists %d organizations (%v), want none", l.TotalCount, err)
		}
		if l, err := c.Organizations.List(ctx, &tfe.OrganizationListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}}); err != nil || l.TotalCount != 2 || len(l.Items) != 1 || l.Items[0].Name != "other" {
			t.Fatalf("page 2 of 1: %+v %v, want other of 2", l, err)
		}
		teams, err := bob.Teams.List(ctx, "acme", nil)
		if err != nil || len(teams.Items) != 1 || teams.Items[0].ID != dev.ID {
			t.Fatalf("member's team list: %+v %v", teams, err)
		}
		_, err = bob.Teams.Read(ctx, secret.ID)
		testenv.WantErr(t, "member reading a secret team", err, tfe.ErrResourceNotFound)

		// Team lists: filters, the caller's view, the page and its total,
		// and the members' users and memberships included.
		for _, n := range []string{"ops_x", "opsyx"} {
			if _, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(n), Visibility: tfe.String("organization")}); err != nil {
				t.Fatal(err)
			}
		}
		teamNames := func(l *tfe.TeamList) string {
			var out []string
			for _, tm := range l.Items {
				out = append(out, tm.Name)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			who         *tfe.Client
			opts        *tfe.TeamListOptions
			want        string
			total, page int
		}{
			{c, nil, "dev,ops_x,opsyx,owners,secret-squad", 5, 1},
			{c, &tfe.TeamListOptions{Query: "S_X"}, "ops_x", 1, 1},
			{c, &tfe.TeamListOptions{Names: []string{"dev", "owners", "nope"}}, "dev,owners", 2, 1},
			{c, &tfe.TeamListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, "opsyx,owners", 5, 2},
			{bob, nil, "dev,ops_x,opsyx", 3, 1},
			{bob, &tfe.TeamListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, "opsyx", 3, 2},
		} {
			l, err := tc.who.Teams.List(ctx, "acme", tc.opts)
			if err != nil || teamNames(l) != tc.want || l.TotalCount != tc.total || l.CurrentPage != tc.page {
				t.Errorf("teams %+v: %q of %d on page %d (%v), want %q of %d on page %d", tc.opts, teamNames(l), l.TotalCount, l.CurrentPage, err, tc.want, tc.total, tc.page)
			}
		}
		withMembers, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"dev"}, Include: []tfe.TeamIncludeOpt{tfe.TeamUsers, tfe.TeamOrganizationMemberships}})
		if err != nil || len(withMembers.Items) != 1 {
			t.Fatalf("dev with its members: %+v %v", withMembers, err)
		}
		if d := withMembers.Items[0]; d.UserCount != 1 || len(d.Users) != 1 || d.Users[0].Username != "bob" ||
			len(d.OrganizationMemberships) != 1 || d.OrganizationMemberships[0].ID != bobMem.ID || d.OrganizationMemberships[0].Email != "bob@example.test" ||
			len(d.OrganizationMemberships[0].Teams) != 1 || d.OrganizationMemberships[0].Teams[0].ID != dev.ID {
			t.Fatalf("dev's members: %d, users %+v, memberships %+v", d.UserCount, d.Users, d.OrganizationMemberships)
		}
		for _, n := range []string{"ops_x", "opsyx"} {
			l, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{n}})
			if err != nil || len(l.Items) != 1 {
				t.Fatal(err)
			}
			if err := c.Teams.Delete(ctx, l.Items[0].ID); err != nil {
				t.Fatal(err)
			}
		}
		_, err = bob.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("mine")})
		testenv.WantStatus(t, "member creating a team", err, "forbidden")
		err = bob.TeamMembers.Add(ctx, dev.ID, tfe.TeamMemberAddOptions{Usernames: []string{"bob"}})
		testenv.WantStatus(t, "member changing membership", err, "forbidden")

		// Members by username and by membership.
		if err := c.TeamMembers.Add(ctx, secret.ID, tfe.TeamMemberAddOptions{OrganizationMembershipIDs: []string{bobMem.ID}}); err != nil {
			t.Fatal(err)
		}
		if _, err := bob.Teams.Read(ctx, secret.ID); err != nil {
			t.Fatalf("member reading its secret team: %v", err)
		}
		users, err := c.TeamMembers.ListUsers(ctx, secret.ID)
		if err != nil || len(users) != 1 || users[0].Username != "bob" {
			t.Fatalf("team users: %+v %v", users, err)
		}
		ms, err := c.TeamMembers.ListOrganizationMemberships(ctx, secret.ID)
		if err != nil || len(ms) != 1 || ms[0].ID != bobMem.ID {
			t.Fatalf("team memberships: %+v %v", ms, err)
		}
		if err := c.TeamMembers.Remove(ctx, secret.ID, tfe.TeamMemberRemoveOptions{Usernames: []string{"bob"}}); err != nil {
			t.Fatal(err)
		}
		err = c.TeamMembers.Add(ctx, secret.ID, tfe.TeamMemberAddOptions{Usernames: []string{"nobody"}})
		testenv.WantErr(t, "adding an unknown user", err, tfe.ErrResourceNotFound)

		// A membership of another organization cannot join this team.
		_, carolMem := e.UserClient(t, "other", "carol@example.test")
		err = c.TeamMembers.Add(ctx, dev.ID, tfe.TeamMemberAddOptions{OrganizationMembershipIDs: []string{carolMem.ID}})
		testenv.WantErr(t, "foreign membership", err, tfe.ErrResourceNotFound)
		_, err = bob.OrganizationMemberships.Read(ctx, carolMem.ID)
		testenv.WantErr(t, "reading a membership of another organization", err, tfe.ErrResourceNotFound)

		// Listing and filters; the creator is an active member.
		list, err := c.OrganizationMemberships.List(ctx, "acme", nil)
		if err != nil || list.TotalCount != 2 {
			t.Fatalf("memberships: %+v %v", list, err)
		}
		// bob accepted his invitation (UserClient).
		list, err = c.OrganizationMemberships.List(ctx, "acme", &tfe.OrganizationMembershipListOptions{Status: tfe.OrganizationMembershipActive})
		if err != nil || len(list.Items) != 2 || list.Items[1].ID != bobMem.ID {
			t.Fatalf("active memberships: %+v %v", list, err)
		}
		list, err = c.OrganizationMemberships.List(ctx, "acme", &tfe.OrganizationMembershipListOptions{Query: "BOB"})
		if err != nil || len(list.Items) != 1 || list.Items[0].ID != bobMem.ID {
			t.Fatalf("q: %+v %v", list, err)
		}
		// The filters and the page are the store's: the total counts what
		// matches, q's "_" is itself, emails match whatever their case,
		// and each listed member carries its teams.
		for _, email := range []string{"a_b@example.test", "axb@example.test"} {
			if _, err := c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String(email)}); err != nil {
				t.Fatal(err)
			}
		}
		emails := func(l *tfe.OrganizationMembershipList) string {
			var out []string
			for _, m := range l.Items {
				out = append(out, m.Email)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			opts        *tfe.OrganizationMembershipListOptions
			want        string
			total, page int
		}{
			{&tfe.OrganizationMembershipListOptions{Query: "A_B"}, "a_b@example.test", 1, 1},
			{&tfe.OrganizationMembershipListOptions{Emails: []string{"AXB@example.TEST", "bob@example.test"}}, "bob@example.test,axb@example.test", 2, 1},
			{&tfe.OrganizationMembershipListOptions{Status: tfe.OrganizationMembershipInvited, ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}}, "axb@example.test", 2, 2},
			{&tfe.OrganizationMembershipListOptions{ListOptions: tfe.ListOptions{PageNumber: 3, PageSize: 2}}, "", 4, 3},
		} {
			l, err := c.OrganizationMemberships.List(ctx, "acme", tc.opts)
			if err != nil || emails(l) != tc.want || l.TotalCount != tc.total || l.CurrentPage != tc.page {
				t.Errorf("memberships %+v: %q of %d on page %d (%v), want %q of %d on page %d", tc.opts, emails(l), l.TotalCount, l.CurrentPage, err, tc.want, tc.total, tc.page)
			}
		}
		l, err := c.OrganizationMemberships.List(ctx, "acme", &tfe.OrganizationMembershipListOptions{Emails: []string{"bob@example.test"}})
		if err != nil || len(l.Items) != 1 || len(l.Items[0].Teams) != 1 || l.Items[0].Teams[0].ID != dev.ID {
			t.Fatalf("bob's membership lists teams %+v (%v), want dev only", l.Items, err)
		}

		_, err = c.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("bob@example.test")})
		testenv.WantStatus(t, "inviting a member twice", err, "already a member")

		// Inviting an existing user's email reuses the user.
		m2, err := c.OrganizationMemberships.Create(ctx, "other", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("bob@example.test")})
		if err != nil || m2.User.ID != bobMem.User.ID {
			t.Fatalf("inviting bob elsewhere: %+v %v", m2, err)
		}

		// Removing the membership removes access and team membership.
		if err := c.OrganizationMemberships.Delete(ctx, bobMem.ID); err != nil {
			t.Fatal(err)
		}
		_, err = bob.Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "former member reading the organization", err, tfe.ErrResourceNotFound)
		team, err := c.Teams.Read(ctx, dev.ID)
		if err != nil || team.UserCount != 0 {
			t.Fatalf("team after membership removal: %+v %v", team, err)
		}
	})
}

func TestTeamTokens(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "other")
		dev, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("dev")})
		if err != nil {
			t.Fatal(err)
		}
		otherTeam, err := c.Teams.Create(ctx, "other", tfe.TeamCreateOptions{Name: tfe.String("dev")})
		if err != nil {
			t.Fatal(err)
		}

		tok, err := c.TeamTokens.Create(ctx, dev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if tok.Token == "" || tok.Team == nil || tok.Team.ID != dev.ID || tok.CreatedBy == nil || tok.CreatedBy.User == nil || tok.Description != nil {
			t.Fatalf("created token: %+v", tok)
		}
		if d := tok.ExpiredAt.Sub(tok.CreatedAt); d < 729*24*time.Hour || d > 732*24*time.Hour {
			t.Fatalf("default expiry is %v after creation, want two years", d)
		}
		read, err := c.TeamTokens.Read(ctx, dev.ID)
		if err != nil || read.ID != tok.ID || read.Token != "" {
			t.Fatalf("reading the token shows %+v %v (the secret must not be shown again)", read, err)
		}

		// The token authenticates as the team: its organization only, and
		// no team management.
		tc := e.NewClient(t, tok.Token)
		if _, err := tc.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("team token reading its organization: %v", err)
		}
		_, err = tc.Organizations.Read(ctx, "other")
		testenv.WantErr(t, "team token reading another organization", err, tfe.ErrResourceNotFound)
		_, err = tc.Teams.Read(ctx, otherTeam.ID)
		testenv.WantErr(t, "team token reading another organization's team", err, tfe.ErrResourceNotFound)
		if _, err := tc.Teams.Read(ctx, dev.ID); err != nil {
			t.Fatalf("team token reading its own team: %v", err)
		}
		_, err = tc.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("x")})
		testenv.WantStatus(t, "team token creating a team", err, "forbidden")
		_, err = tc.TeamTokens.Create(ctx, dev.ID)
		testenv.WantStatus(t, "team token regenerating itself", err, "forbidden")
		_, err = tc.Users.ReadCurrent(ctx)
		testenv.WantErr(t, "team token reading account details", err, tfe.ErrResourceNotFound)

		// Regenerating revokes the old secret.
		tok2, err := c.TeamTokens.Create(ctx, dev.ID)
		if err != nil || tok2.Token == tok.Token {
			t.Fatalf("regenerating: %+v %v", tok2, err)
		}
		_, err = tc.Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "regenerated token", err, tfe.ErrUnauthorized)
		tc2 := e.NewClient(t, tok2.Token)
		if _, err := tc2.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("new token: %v", err)
		}

		// Described tokens live side by side; descriptions are unique.
		desc := "ci"
		d1, err := c.TeamTokens.CreateWithOptions(ctx, dev.ID, tfe.TeamTokenCreateOptions{Description: &desc})
		if err != nil || d1.Description == nil || *d1.Description != "ci" {
			t.Fatalf("described token: %+v %v", d1, err)
		}
		_, err = c.TeamTokens.CreateWithOptions(ctx, dev.ID, tfe.TeamTokenCreateOptions{Description: &desc})
		if err == nil || err.Error() != tfe.ErrInvalidDescriptionConflict.Error() {
			t.Fatalf("duplicate description: got %v, want go-tfe's ErrInvalidDescriptionConflict", err)
		}
		if _, err := tc2.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("a described token must not revoke the legacy one: %v", err)
		}
		list, err := c.TeamTokens.List(ctx, "acme", nil)
		if err != nil || len(list.Items) != 2 {
			t.Fatalf("team tokens of acme: %+v %v", list, err)
		}
		for _, it := range list.Items {
			if it.Token != "" {
				t.Fatal("a token list shows a secret")
			}
		}
		byID, err := c.TeamTokens.ReadByID(ctx, d1.ID)
		if err != nil || byID.Team.ID != dev.ID || byID.Token != "" {
			t.Fatalf("read by id: %+v %v", byID, err)
		}
		if err := c.TeamTokens.DeleteByID(ctx, d1.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.NewClient(t, d1.Token).Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "deleted described token", err, tfe.ErrUnauthorized)

		// Expiry: in the past is refused; an expired token is a 401.
		past := time.Now().Add(-time.Hour)
		_, err = c.TeamTokens.CreateWithOptions(ctx, dev.ID, tfe.TeamTokenCreateOptions{ExpiredAt: &past})
		testenv.WantStatus(t, "expiry in the past", err, "future")
		soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
		tok3, err := c.TeamTokens.CreateWithOptions(ctx, dev.ID, tfe.TeamTokenCreateOptions{ExpiredAt: &soon})
		if err != nil || !tok3.ExpiredAt.Equal(soon) {
			t.Fatalf("token with expiry: %+v %v", tok3, err)
		}
		tc3 := e.NewClient(t, tok3.Token)
		if _, err := tc3.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatalf("unexpired token: %v", err)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE tokens SET expired_at = ? WHERE id = ?`, time.Now().Add(-time.Minute).UnixMicro(), tok3.ID); err != nil {
			t.Fatal(err)
		}
		_, err = tc3.Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "expired token", err, tfe.ErrUnauthorized)

		// Deleting the legacy token revokes it; a second delete is a 404.
		tok4, err := c.TeamTokens.Create(ctx, dev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.TeamTokens.Delete(ctx, dev.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.NewClient(t, tok4.Token).Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "deleted token", err, tfe.ErrUnauthorized)
		testenv.WantErr(t, "deleting twice", c.TeamTokens.Delete(ctx, dev.ID), tfe.ErrResourceNotFound)

		// Deleting the team revokes its tokens.
		tok5, err := c.TeamTokens.Create(ctx, dev.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Teams.Delete(ctx, dev.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.NewClient(t, tok5.Token).Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "token of a deleted team", err, tfe.ErrUnauthorized)

		// The owners team's token has owner rights in its organization only.
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("owners team: %+v %v", owners, err)
		}
		ot, err := c.TeamTokens.Create(ctx, owners.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		oc := e.NewClient(t, ot.Token)
		if _, err := oc.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("by-owners-token")}); err != nil {
			t.Fatalf("owners team token creating a team: %v", err)
		}
		_, err = oc.Teams.Create(ctx, "other", tfe.TeamCreateOptions{Name: tfe.String("x")})
		testenv.WantErr(t, "owners team token in another organization", err, tfe.ErrResourceNotFound)

		// Members manage their team's tokens only when the team allows it.
		ops, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), AllowMemberTokenManagement: tfe.Bool(false)})
		if err != nil {
			t.Fatal(err)
		}
		bob, _ := e.UserClient(t, "acme", "bob@example.test", ops)
		_, err = bob.TeamTokens.Create(ctx, ops.ID)
		testenv.WantStatus(t, "member of a team without member token management", err, "forbidden")
		if _, err := c.Teams.Update(ctx, ops.ID, tfe.TeamUpdateOptions{AllowMemberTokenManagement: tfe.Bool(true)}); err != nil {
			t.Fatal(err)
		}
		bobTok, err := bob.TeamTokens.Create(ctx, ops.ID)
		if err != nil {
			t.Fatalf("member managing its team's token: %v", err)
		}
		// The organization's team tokens: the owners list them all (in
		// one statement), a member may not.
		teamsOf := func(l *tfe.TeamTokenList) map[string]int {
			out := map[string]int{}
			if l == nil {
				return out
			}
			for _, tk := range l.Items {
				if tk.Team != nil {
					out[tk.Team.ID]++
				}
			}
			return out
		}
		_, err = bob.TeamTokens.List(ctx, "acme", nil)
		testenv.WantStatus(t, "a member listing the organization's team tokens", err, "forbidden")
		all, err := c.TeamTokens.List(ctx, "acme", nil)
		if got := teamsOf(all); err != nil || got[ops.ID] != 1 || got[owners.Items[0].ID] != 1 || !slices.ContainsFunc(all.Items, func(tk *tfe.TeamToken) bool { return tk.ID == bobTok.ID }) {
			t.Fatalf("the owner lists team tokens of %v (%v), want ops and owners", got, err)
		}
		if q, err := c.TeamTokens.List(ctx, "acme", &tfe.TeamTokenListOptions{Query: "OPS"}); err != nil || len(teamsOf(q)) != 1 || teamsOf(q)[ops.ID] != 1 {
			t.Fatalf("q=OPS lists team tokens of %v (%v), want ops only", teamsOf(q), err)
		}
	})
}

// No team is renamed "owners": the name is the owners team's. A rename
// that also sets organization access was refused as if it were the
// owners team ("its organization access cannot be changed"), the name
// being looked at after it changed; it is refused as the taken name it
// is, and the team keeps its name and access.
func TestRenamingATeamOwnersIsATakenName(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ops, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), Visibility: tfe.String("organization")})
		if err != nil {
			t.Fatal(err)
		}
		for _, opts := range []tfe.TeamUpdateOptions{
			{Name: tfe.String("owners")},
			{Name: tfe.String("owners"), OrganizationAccess: &tfe.OrganizationAccessOptions{ManagePolicies: tfe.Bool(false)}},
		} {
			if _, err := c.Teams.Update(ctx, ops.ID, opts); err == nil || !strings.Contains(err.Error(), `name "owners" has already been taken`) {
				t.Errorf("renaming ops owners (access %v): %v, want the name refused as taken", opts.OrganizationAccess != nil, err)
			}
		}
		got, err := c.Teams.Read(ctx, ops.ID)
		if err != nil || got.Name != "ops" || got.OrganizationAccess.ManagePolicies {
			t.Fatalf("after the refused renames ops reads %+v %v", got, err)
		}
		if _, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("owners"), Visibility: tfe.String("organization")}); err == nil || !strings.Contains(err.Error(), "already been taken") {
			t.Errorf("creating a second owners team: %v, want the name refused as taken", err)
		}
	})
}
