package user_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// usernames lists the usernames of an admin users page.
func usernames(l *tfe.AdminUserList) []string {
	var out []string
	for _, u := range l.Items {
		out = append(out, u.Username)
	}
	return out
}

// errorDetail returns the detail of a JSON:API error document's first
// error ("" when the body is no such document).
func errorDetail(body []byte) string {
	var doc struct {
		Errors []struct {
			Status, Detail string
		}
	}
	if json.Unmarshal(body, &doc) != nil || len(doc.Errors) == 0 {
		return ""
	}
	return doc.Errors[0].Detail
}

// TestAdminUsersList: the site admins' list of every user, filtered by q
// (username or email), filter[admin] and filter[suspended] and paged in
// the store, with the organizations each user belongs to (and, asked for,
// included); a bad filter is a 400 that says why.
func TestAdminUsersList(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		testenv.NewOrg(t, e.Client, "beta")
		_, alice := e.UserClient(t, "acme", "alice@example.test")
		if _, err := e.Client.OrganizationMemberships.Create(ctx, "beta", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("alice@example.test")}); err != nil {
			t.Fatal(err)
		}
		_, bob := e.UserClient(t, "beta", "bob@other.test")

		all, err := e.Client.Admin.Users.List(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if all.TotalCount != 3 || len(all.Items) != 3 {
			t.Fatalf("every user: %v (total %d), want the site admin, alice and bob", usernames(all), all.TotalCount)
		}
		byID := map[string]*tfe.AdminUser{}
		for _, u := range all.Items {
			byID[u.ID] = u
		}
		a := byID[alice.User.ID]
		if a == nil || a.Email != "alice@example.test" || a.IsAdmin || a.IsSuspended || a.TwoFactor == nil || a.TwoFactor.Enabled {
			t.Fatalf("alice as listed: %+v", a)
		}
		// Only accepted memberships make a member: alice's invitation to
		// beta is still waiting.
		if len(a.Organizations) != 1 || a.Organizations[0].Name != "acme" {
			t.Fatalf("alice's organizations: %+v, want acme", a.Organizations)
		}
		if admin := byID[siteAdminID(t, e)]; admin == nil || !admin.IsAdmin {
			t.Fatalf("the site admin as listed: %+v", admin)
		}

		for _, c := range []struct {
			opts tfe.AdminUserListOptions
			want []string
		}{
			{tfe.AdminUserListOptions{Query: "ALICE"}, []string{alice.User.Username}},
			{tfe.AdminUserListOptions{Query: "other.test"}, []string{bob.User.Username}},
			{tfe.AdminUserListOptions{Query: "%"}, nil},
			{tfe.AdminUserListOptions{Administrators: "true"}, []string{"admin"}},
			{tfe.AdminUserListOptions{Administrators: "false", Query: "example"}, []string{alice.User.Username}},
			{tfe.AdminUserListOptions{SuspendedUsers: "true"}, nil},
		} {
			l, err := e.Client.Admin.Users.List(ctx, &c.opts)
			if err != nil {
				t.Fatalf("%+v: %v", c.opts, err)
			}
			if got := usernames(l); !slices.Equal(got, c.want) || l.TotalCount != len(c.want) {
				t.Errorf("%+v: %v (total %d), want %v", c.opts, got, l.TotalCount, c.want)
			}
		}

		// Paged in the store: two pages of two, then nothing.
		p1, err := e.Client.Admin.Users.List(ctx, &tfe.AdminUserListOptions{ListOptions: tfe.ListOptions{PageSize: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p2, err := e.Client.Admin.Users.List(ctx, &tfe.AdminUserListOptions{ListOptions: tfe.ListOptions{PageSize: 2, PageNumber: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p9, err := e.Client.Admin.Users.List(ctx, &tfe.AdminUserListOptions{ListOptions: tfe.ListOptions{PageSize: 2, PageNumber: 9}})
		if err != nil {
			t.Fatal(err)
		}
		if len(p1.Items) != 2 || len(p2.Items) != 1 || len(p9.Items) != 0 || p1.TotalPages != 2 || p9.CurrentPage != 9 ||
			slices.Contains(usernames(p1), p2.Items[0].Username) {
			t.Fatalf("pages %v, %v, %v (%+v)", usernames(p1), usernames(p2), usernames(p9), p1.Pagination)
		}

		// include=organizations: the organizations' documents.
		status, body := e.API(t, "", "GET", "/api/v2/admin/users?q=alice&include=organizations", nil)
		var doc struct {
			Included []struct {
				Type, ID   string
				Attributes map[string]any
			}
		}
		if err := json.Unmarshal(body, &doc); status != http.StatusOK || err != nil || len(doc.Included) != 1 ||
			doc.Included[0].Type != "organizations" || doc.Included[0].ID != "acme" || doc.Included[0].Attributes["email"] != "ops@acme.test" {
			t.Fatalf("include=organizations: %d %s", status, body)
		}

		for _, q := range []string{"filter[admin]=yes", "filter[suspended]=1", "filter[email]=alice@example.test", "include=teams", "page[size]=x"} {
			status, body := e.API(t, "", "GET", "/api/v2/admin/users?"+q, nil)
			if status != http.StatusBadRequest || errorDetail(body) == "" {
				t.Errorf("?%s: %d %s, want a 400 that says why", q, status, body)
			}
		}
	})
}

// TestAdminUsersActions: a site admin suspends, unsuspends, grants and
// revokes site admin rights and deletes users, each taking effect on the
// user's next request; a site admin cannot do that to their own account,
// nor delete an organization's only owner; every change is in the site's
// audit trail; and to anyone else the routes do not exist.
func TestAdminUsersActions(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		alice, am := e.UserClient(t, "acme", "alice@example.test")
		bob, bm := e.UserClient(t, "acme", "bob@example.test")
		aliceID, bobID := am.User.ID, bm.User.ID

		// To anyone else every route is a 404, as an unknown route is.
		_, aliceToken, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: aliceID})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range []struct{ method, path string }{
			{"GET", "/api/v2/admin/users"},
			{"DELETE", "/api/v2/admin/users/" + bobID},
			{"POST", "/api/v2/admin/users/" + bobID + "/actions/suspend"},
			{"POST", "/api/v2/admin/users/" + aliceID + "/actions/grant_admin"},
			{"POST", "/api/v2/admin/users/" + bobID + "/actions/disable_two_factor"},
		} {
			if status, body := e.API(t, aliceToken, r.method, r.path, nil); status != http.StatusNotFound || errorDetail(body) == "" {
				t.Errorf("%s %s by a user: %d %s, want a JSON:API 404", r.method, r.path, status, body)
			}
		}
		if _, err := e.Server.Auth.Authenticate(ctx, aliceToken); err != nil {
			t.Fatal(err)
		}

		// Suspended: refused at once, and listed as suspended.
		u, err := e.Client.Admin.Users.Suspend(ctx, aliceID)
		if err != nil || !u.IsSuspended || u.ID != aliceID {
			t.Fatalf("suspending: %+v, %v", u, err)
		}
		if _, err := alice.Users.ReadCurrent(ctx); !errors.Is(err, tfe.ErrUnauthorized) {
			t.Fatalf("a suspended user's request: %v, want 401", err)
		}
		if _, err := e.Server.Auth.Authenticate(ctx, aliceToken); core.KindOf(err) != core.KindUnauthorized || !strings.Contains(err.Error(), "suspended") {
			t.Fatalf("a suspended user's token: %v", err)
		}
		l, err := e.Client.Admin.Users.List(ctx, &tfe.AdminUserListOptions{SuspendedUsers: "true"})
		if err != nil || len(l.Items) != 1 || l.Items[0].ID != aliceID {
			t.Fatalf("suspended users: %+v, %v", l, err)
		}
		if _, err := e.Client.Admin.Users.Unsuspend(ctx, aliceID); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.Users.ReadCurrent(ctx); err != nil {
			t.Fatalf("after unsuspending: %v", err)
		}

		// Site admin rights, granted and revoked.
		if u, err := e.Client.Admin.Users.GrantAdmin(ctx, aliceID); err != nil || !u.IsAdmin {
			t.Fatalf("granting site admin: %+v, %v", u, err)
		}
		if _, err := alice.Admin.Users.List(ctx, nil); err != nil {
			t.Fatalf("a new site admin lists users: %v", err)
		}
		// A site admin cannot revoke, suspend or delete themselves.
		for what, do := range map[string]func() error{
			"revoke":  func() error { _, err := alice.Admin.Users.RevokeAdmin(ctx, aliceID); return err },
			"suspend": func() error { _, err := alice.Admin.Users.Suspend(ctx, aliceID); return err },
			"delete":  func() error { return alice.Admin.Users.Delete(ctx, aliceID) },
		} {
			err := do()
			testenv.WantStatus(t, what+" oneself", err, "invalid attribute") // 422
			testenv.WantStatus(t, what+" oneself", err, "your own")
		}
		if u, err := e.Client.Admin.Users.RevokeAdmin(ctx, aliceID); err != nil || u.IsAdmin {
			t.Fatalf("revoking site admin: %+v, %v", u, err)
		}
		if _, err := alice.Admin.Users.List(ctx, nil); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("a former site admin lists users: %v, want 404", err)
		}

		// Terrace has no two-factor sign-in: it is off, as asked.
		if u, err := e.Client.Admin.Users.Disable2FA(ctx, bobID); err != nil || u.TwoFactor == nil || u.TwoFactor.Enabled || u.ID != bobID {
			t.Fatalf("disabling two-factor: %+v, %v", u, err)
		}

		// The only owner of an organization cannot be deleted.
		owners := ownersTeam(t, e, "acme")
		if err := e.Client.TeamMembers.Add(ctx, owners.ID, tfe.TeamMemberAddOptions{Usernames: []string{bm.User.Username}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Client.TeamMembers.Remove(ctx, owners.ID, tfe.TeamMemberRemoveOptions{Usernames: []string{"admin"}}); err != nil {
			t.Fatal(err)
		}
		err = e.Client.Admin.Users.Delete(ctx, bobID)
		testenv.WantStatus(t, "deleting an organization's only owner", err, "invalid attribute")
		if !strings.Contains(err.Error(), "acme") {
			t.Fatalf("deleting an organization's only owner: %v, want the organization named", err)
		}
		if err := e.Client.TeamMembers.Add(ctx, owners.ID, tfe.TeamMemberAddOptions{Usernames: []string{am.User.Username}}); err != nil {
			t.Fatal(err)
		}
		if err := e.Client.Admin.Users.Delete(ctx, bobID); err != nil {
			t.Fatalf("deleting one of two owners: %v", err)
		}
		if _, err := bob.Users.ReadCurrent(ctx); !errors.Is(err, tfe.ErrUnauthorized) {
			t.Fatalf("a deleted user's token: %v, want 401", err)
		}
		if l, err := e.Client.Admin.Users.List(ctx, &tfe.AdminUserListOptions{Query: "bob"}); err != nil || len(l.Items) != 0 {
			t.Fatalf("the deleted user is still listed: %+v, %v", l, err)
		}
		if err := e.Client.Admin.Users.Delete(ctx, bobID); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting a deleted user: %v, want 404", err)
		}
		if err := e.Client.Admin.Users.Delete(ctx, "not-a-user"); !errors.Is(err, tfe.ErrResourceNotFound) {
			t.Fatalf("deleting what is no user's ID: %v, want 404", err)
		}

		// The site's audit trail has every change, as site events.
		var got []string
		for _, ev := range e.AuditTrail(t) {
			if ev.Resource.Type == "user" && ev.OrganizationID == "" {
				got = append(got, ev.Resource.Action+" "+ev.Resource.ID)
			}
		}
		for _, want := range []string{"suspend " + aliceID, "unsuspend " + aliceID, "grant_admin " + aliceID, "revoke_admin " + aliceID, "delete " + bobID} {
			if !slices.Contains(got, want) {
				t.Errorf("the audit trail has %v, not %q", got, want)
			}
		}
	})
}

// siteAdminID is the ID of the site token's user.
func siteAdminID(t *testing.T, e *testenv.Env) string {
	t.Helper()
	u, err := e.Server.Auth.UserByName(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	return u.ID
}

// ownersTeam returns the owners team of org.
func ownersTeam(t *testing.T, e *testenv.Env, org string) *tfe.Team {
	t.Helper()
	l, err := e.Client.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the owners team of %s: %+v, %v", org, l, err)
	}
	return l.Items[0]
}

// TestAdminUsersKeepASiteAdmin: no change leaves Terrace without a site
// admin who is not suspended, even one decided on a principal read before
// another admin's change (two site admins revoking each other at once):
// the changing transaction counts the active site admins again.
func TestAdminUsersKeepASiteAdmin(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		alice, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, "alice", "alice@example.test", false)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Client.Admin.Users.GrantAdmin(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		// Alice's request was authorized while she was a site admin; by
		// the time it runs, the site token's admin has revoked her.
		stale := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, UserID: alice.ID, Username: alice.Username, SiteAdmin: true})
		if _, err := e.Client.Admin.Users.RevokeAdmin(ctx, alice.ID); err != nil {
			t.Fatal(err)
		}
		adminID := siteAdminID(t, e)
		for what, do := range map[string]func() error{
			"revoke":  func() error { _, err := e.Server.Users.SetSiteAdmin(stale, adminID, false); return err },
			"suspend": func() error { _, err := e.Server.Users.Suspend(stale, adminID, true); return err },
			"delete":  func() error { return e.Server.Users.AdminDelete(stale, adminID) },
		} {
			if err := do(); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "without a site admin") {
				t.Errorf("%s the last site admin: %v, want it refused", what, err)
			}
		}
		if _, err := e.Client.Admin.Users.List(ctx, nil); err != nil {
			t.Fatalf("the site admin after the refusals: %v", err)
		}
	})
}
