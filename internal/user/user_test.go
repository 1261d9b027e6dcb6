package user_test

import (
	"context"
	"errors"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestOrganizationTokens(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "other")
		otherTeam, err := c.Teams.Create(ctx, "other", tfe.TeamCreateOptions{Name: tfe.String("dev")})
		if err != nil {
			t.Fatal(err)
		}

		_, err = c.OrganizationTokens.Read(ctx, "acme")
		testenv.WantErr(t, "no token yet", err, tfe.ErrResourceNotFound)
		tok, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil || tok.Token == "" || tok.CreatedBy == nil || tok.CreatedBy.User == nil {
			t.Fatalf("creating: %+v %v", tok, err)
		}
		oc := e.NewClient(t, tok.Token)

		// An organization token acts as an owner of its organization only.
		team, err := oc.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("made-by-org")})
		if err != nil {
			t.Fatalf("organization token creating a team: %v", err)
		}
		tt, err := oc.TeamTokens.Create(ctx, team.ID)
		if err != nil || tt.CreatedBy == nil || tt.CreatedBy.Organization == nil || tt.CreatedBy.Organization.Name != "acme" {
			t.Fatalf("organization token creating a team token: %+v %v", tt, err)
		}
		_, err = oc.TeamTokens.Create(ctx, otherTeam.ID)
		testenv.WantErr(t, "organization token creating another organization's team token", err, tfe.ErrResourceNotFound)
		_, err = oc.Teams.List(ctx, "other", nil)
		testenv.WantErr(t, "organization token listing another organization's teams", err, tfe.ErrResourceNotFound)
		_, err = oc.OrganizationTokens.Create(ctx, "acme")
		testenv.WantStatus(t, "organization token regenerating itself", err, "forbidden")
		_, err = oc.Users.ReadCurrent(ctx)
		testenv.WantErr(t, "organization token reading account details", err, tfe.ErrResourceNotFound)

		read, err := c.OrganizationTokens.Read(ctx, "acme")
		if err != nil || read.ID != tok.ID || read.Token != "" {
			t.Fatalf("read: %+v %v", read, err)
		}

		// Regenerating replaces; deleting revokes.
		tok2, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		_, err = oc.Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "replaced organization token", err, tfe.ErrUnauthorized)
		oc2 := e.NewClient(t, tok2.Token)
		if _, err := oc2.Organizations.Read(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		if err := c.OrganizationTokens.Delete(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		_, err = oc2.Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "deleted organization token", err, tfe.ErrUnauthorized)

		// Audit-trail tokens are separate and authenticate nothing else.
		at := tfe.AuditTrailToken
		audit, err := c.OrganizationTokens.CreateWithOptions(ctx, "acme", tfe.OrganizationTokenCreateOptions{TokenType: &at})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.OrganizationTokens.Read(ctx, "acme"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("an audit-trail token is not the organization token: %v", err)
		}
		got, err := c.OrganizationTokens.ReadWithOptions(ctx, "acme", tfe.OrganizationTokenReadOptions{TokenType: &at})
		if err != nil || got.ID != audit.ID {
			t.Fatalf("reading the audit-trail token: %+v %v", got, err)
		}
		_, err = e.NewClient(t, audit.Token).Organizations.Read(ctx, "acme")
		testenv.WantErr(t, "audit-trail token on the API", err, tfe.ErrUnauthorized)
		if err := c.OrganizationTokens.DeleteWithOptions(ctx, "acme", tfe.OrganizationTokenDeleteOptions{TokenType: &at}); err != nil {
			t.Fatal(err)
		}

		// A plain member may not manage organization tokens.
		bob, _ := e.UserClient(t, "acme", "bob@example.test")
		_, err = bob.OrganizationTokens.Create(ctx, "acme")
		testenv.WantStatus(t, "member creating an organization token", err, "forbidden")
		_, err = bob.OrganizationTokens.Create(ctx, "other")
		testenv.WantErr(t, "member creating another organization's token", err, tfe.ErrResourceNotFound)

		// Nor may the owners team's token: the organization's tokens take
		// an owner's user token (OrgManageTokens), whether the guard or
		// the service asks.
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		ownersToken, err := c.TeamTokens.Create(ctx, owners.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.NewClient(t, ownersToken.Token).OrganizationTokens.Create(ctx, "acme")
		testenv.WantStatus(t, "the owners team's token creating an organization token", err, "forbidden")
		p, err := e.Server.Auth.Authenticate(ctx, ownersToken.Token)
		if err != nil {
			t.Fatal(err)
		}
		sctx := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		if _, _, err := e.Server.Users.CreateOrganizationToken(sctx, "acme", "", nil); core.KindOf(err) != core.KindForbidden {
			t.Errorf("service: the owners team's token creating an organization token: %v, want forbidden", err)
		}
	})
}

func TestUsersAndUserTokens(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		bob, bobMem := e.UserClient(t, "acme", "bob@example.test")

		me, err := bob.Users.ReadCurrent(ctx)
		//lint:ignore SA1019 HCP Terraform still sends is-site-admin and go-tfe still reads it; Terrace must say false here.
		if err != nil || me.ID != bobMem.User.ID || me.Username != "bob" || me.Permissions == nil || me.IsSiteAdmin == nil || *me.IsSiteAdmin {
			t.Fatalf("account details: %+v %v", me, err)
		}
		up, err := bob.Users.UpdateCurrent(ctx, tfe.UserUpdateOptions{Username: tfe.String("robert"), Email: tfe.String("robert@example.test")})
		if err != nil || up.Username != "robert" || up.Email != "robert@example.test" {
			t.Fatalf("update: %+v %v", up, err)
		}
		_, err = bob.Users.UpdateCurrent(ctx, tfe.UserUpdateOptions{Username: tfe.String("admin")})
		testenv.WantStatus(t, "taking a used username", err, "already been taken")
		_, err = bob.Users.UpdateCurrent(ctx, tfe.UserUpdateOptions{Email: tfe.String("not-an-email")})
		testenv.WantStatus(t, "bad email", err, "not a valid address")

		// User tokens: only the user's own.
		tok, err := bob.UserTokens.Create(ctx, me.ID, tfe.UserTokenCreateOptions{Description: "laptop"})
		if err != nil || tok.Token == "" || tok.Description != "laptop" || tok.CreatedBy == nil || tok.CreatedBy.User == nil {
			t.Fatalf("creating a user token: %+v %v", tok, err)
		}
		bc := e.NewClient(t, tok.Token)
		who, err := bc.Users.ReadCurrent(ctx)
		if err != nil || who.ID != me.ID {
			t.Fatalf("new user token: %+v %v", who, err)
		}
		list, err := bob.UserTokens.List(ctx, me.ID)
		if err != nil || len(list.Items) != 2 {
			t.Fatalf("listing user tokens: %+v %v", list, err)
		}
		admin, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = bob.UserTokens.List(ctx, admin.ID)
		testenv.WantErr(t, "listing another user's tokens", err, tfe.ErrResourceNotFound)
		_, err = bob.UserTokens.Create(ctx, admin.ID, tfe.UserTokenCreateOptions{})
		testenv.WantErr(t, "creating another user's token", err, tfe.ErrResourceNotFound)
		_, err = c.UserTokens.Read(ctx, tok.ID)
		testenv.WantErr(t, "reading another user's token", err, tfe.ErrResourceNotFound)
		testenv.WantErr(t, "deleting another user's token", c.UserTokens.Delete(ctx, tok.ID), tfe.ErrResourceNotFound)
		got, err := bob.UserTokens.Read(ctx, tok.ID)
		if err != nil || got.Token != "" || got.Description != "laptop" {
			t.Fatalf("reading the token: %+v %v", got, err)
		}
		if err := bob.UserTokens.Delete(ctx, tok.ID); err != nil {
			t.Fatal(err)
		}
		_, err = bc.Users.ReadCurrent(ctx)
		testenv.WantErr(t, "deleted user token", err, tfe.ErrUnauthorized)
		_, err = bob.UserTokens.Read(ctx, "at-nonexistent")
		testenv.WantErr(t, "unknown token", err, tfe.ErrResourceNotFound)

		// users/{id}: visible to members of a shared organization only.
		testenv.NewOrg(t, c, "other")
		carol, _ := e.UserClient(t, "other", "carol@example.test")
		carolMe, err := carol.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			who    *tfe.Client
			id     string
			status int
		}{
			{c, me.ID, 200}, {bob, admin.ID, 200}, {bob, carolMe.ID, 404}, {carol, me.ID, 404}, {bob, "user-nope", 404}, {bob, "x", 404},
		} {
			req, err := tc.who.NewRequest("GET", "users/"+tc.id, nil)
			if err != nil {
				t.Fatal(err)
			}
			var u tfe.User
			err = req.Do(ctx, &u)
			switch {
			case tc.status == 200 && (err != nil || u.ID != tc.id || u.Username == ""):
				t.Errorf("GET users/%s: %+v %v", tc.id, u, err)
			case tc.status == 404 && !errors.Is(err, tfe.ErrResourceNotFound):
				t.Errorf("GET users/%s: got %v, want a 404", tc.id, err)
			}
		}
	})
}
