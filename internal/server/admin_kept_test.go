package server_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAdminDecisionsReachEveryReplica: two replicas on one database (both
// stores) keep principals between requests (internal/auth, cache.go). A
// site admin's decision made through one replica, suspending a user,
// granting or revoking site admin rights, disabling an organization, shows
// on the very next request on both: the suspended user's token and browser
// session are refused, the new site admin reaches the admin API and the
// former one does not, a disabled organization's members, team token and
// organization token are refused there; undone, everything comes back and
// the request after the first is answered from the kept principal again
// (one statement).
func TestAdminDecisionsReachEveryReplica(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			a := testenv.New(t, testenv.Options{Store: st})
			b := testenv.New(t, testenv.ReplicaOf(t, a))
			replicas := []*testenv.Env{a, b}
			ctx := context.Background()
			testenv.NewOrg(t, a.Client, "acme")
			devs, err := a.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
			if err != nil {
				t.Fatal(err)
			}
			_, m := a.UserClient(t, "acme", "dev@acme.test", devs)
			user := m.User
			_, secret, err := a.Server.Auth.CreateToken(ctx, a.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: user.ID})
			if err != nil {
				t.Fatal(err)
			}
			teamTok, err := a.Client.TeamTokens.Create(ctx, devs.ID)
			if err != nil {
				t.Fatal(err)
			}
			orgTok, err := a.Client.OrganizationTokens.Create(ctx, "acme")
			if err != nil {
				t.Fatal(err)
			}
			session, err := a.Server.Signin.StartSession(ctx, user.ID)
			if err != nil {
				t.Fatal(err)
			}

			// kept authenticates secret on every replica, four times, and
			// requires each to give the same principal (or refusal), the
			// ones after the first in one statement (the epoch's).
			kept := func(step, secret string) (*auth.Principal, error) {
				t.Helper()
				var first *auth.Principal
				var firstErr error
				for i, r := range replicas {
					least := int64(1 << 30)
					for n := range 4 {
						counted, count := core.WithStatementCount(ctx)
						p, err := r.Server.Auth.Authenticate(counted, secret)
						if n > 0 {
							least = min(least, count())
						}
						if i == 0 && n == 0 {
							first, firstErr = p, err
						}
						if fmt.Sprint(err) != fmt.Sprint(firstErr) || (err == nil && fmt.Sprint(*p) != fmt.Sprint(*first)) {
							t.Fatalf("%s: replica %d, request %d: %+v, %v; replica 0 said %+v, %v", step, i, n, p, err, first, firstErr)
						}
					}
					if firstErr == nil && least != 1 {
						t.Errorf("%s: replica %d: a known token authenticated in %d statements, want 1 (the epoch)", step, i, least)
					}
				}
				return first, firstErr
			}
			// signedIn reports, on every replica alike, whether the
			// browser session opens a page that needs a signed-in user.
			noRedirect := func(hc *http.Client) *http.Client {
				c := *hc
				c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
				return &c
			}
			signedIn := func(step string) bool {
				t.Helper()
				var got []bool
				for _, r := range replicas {
					req, err := http.NewRequest("GET", r.URL+"/app/settings/tokens", nil)
					if err != nil {
						t.Fatal(err)
					}
					req.AddCookie(&http.Cookie{Name: signin.CookieName, Value: session})
					resp, err := noRedirect(r.HTTP).Do(req)
					if err != nil {
						t.Fatal(err)
					}
					resp.Body.Close()
					got = append(got, resp.StatusCode == http.StatusOK)
					if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusSeeOther {
						t.Fatalf("%s: the session's page answered %d", step, resp.StatusCode)
					}
				}
				if got[0] != got[1] {
					t.Fatalf("%s: the session is signed in on replica 0 %t, on replica 1 %t", step, got[0], got[1])
				}
				return got[0]
			}
			// adminAPI is the status of the user's GET admin/users on
			// every replica.
			adminAPI := func(step string) int {
				t.Helper()
				var got []int
				for _, r := range replicas {
					status, _ := r.API(t, secret, "GET", "/api/v2/admin/users", nil)
					got = append(got, status)
				}
				if got[0] != got[1] {
					t.Fatalf("%s: admin/users answered %v on the two replicas", step, got)
				}
				return got[0]
			}

			p, err := kept("a member", secret)
			if err != nil || !slices.Equal(p.Orgs, []string{"acme"}) || p.SiteAdmin || !signedIn("a member") {
				t.Fatalf("a member: %+v, %v", p, err)
			}
			kept("a team token", teamTok.Token)
			kept("an organization token", orgTok.Token)

			if _, err := a.Client.Admin.Users.Suspend(ctx, user.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := kept("suspended through replica a", secret); core.KindOf(err) != core.KindUnauthorized || !strings.Contains(err.Error(), "suspended") {
				t.Fatalf("a suspended user's token: %v, want refused", err)
			}
			if signedIn("suspended") {
				t.Fatal("a suspended user's browser session still signs in")
			}
			if _, err := b.Client.Admin.Users.Unsuspend(ctx, user.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := kept("unsuspended through replica b", secret); err != nil || !signedIn("unsuspended") {
				t.Fatalf("an unsuspended user: %v", err)
			}

			if got := adminAPI("a member"); got != http.StatusNotFound {
				t.Fatalf("a member's admin/users: %d, want 404", got)
			}
			if _, err := b.Client.Admin.Users.GrantAdmin(ctx, user.ID); err != nil {
				t.Fatal(err)
			}
			if p, err := kept("granted site admin through replica b", secret); err != nil || !p.SiteAdmin {
				t.Fatalf("a new site admin: %+v, %v", p, err)
			}
			if got := adminAPI("granted"); got != http.StatusOK {
				t.Fatalf("a new site admin's admin/users: %d, want 200", got)
			}
			if _, err := a.Client.Admin.Users.RevokeAdmin(ctx, user.ID); err != nil {
				t.Fatal(err)
			}
			if p, err := kept("revoked through replica a", secret); err != nil || p.SiteAdmin {
				t.Fatalf("a former site admin: %+v, %v", p, err)
			}
			if got := adminAPI("revoked"); got != http.StatusNotFound {
				t.Fatalf("a former site admin's admin/users: %d, want 404", got)
			}

			disabled := true
			if _, err := a.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &disabled}); err != nil {
				t.Fatal(err)
			}
			p, err = kept("acme disabled through replica a", secret)
			if err != nil || len(p.Orgs) != 0 || len(p.Owns) != 0 || !slices.Equal(p.Disabled, []string{"acme"}) {
				t.Fatalf("a member of a disabled organization: %+v, %v", p, err)
			}
			for _, r := range replicas {
				if status, body := r.API(t, secret, "GET", "/api/v2/organizations/acme", nil); status != http.StatusForbidden || !strings.Contains(string(body), "disabled") {
					t.Fatalf("a member reading a disabled organization: %d %s", status, body)
				}
			}
			for name, tok := range map[string]string{"team": teamTok.Token, "organization": orgTok.Token} {
				if _, err := kept("acme disabled", tok); core.KindOf(err) != core.KindForbidden || !strings.Contains(err.Error(), "disabled") {
					t.Fatalf("the %s token of a disabled organization: %v, want refused", name, err)
				}
			}
			disabled = false
			if _, err := b.Client.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: &disabled}); err != nil {
				t.Fatal(err)
			}
			if p, err := kept("acme enabled through replica b", secret); err != nil || !slices.Equal(p.Orgs, []string{"acme"}) || len(p.Disabled) != 0 {
				t.Fatalf("a member of an enabled organization: %+v, %v", p, err)
			}
			for name, tok := range map[string]string{"team": teamTok.Token, "organization": orgTok.Token} {
				if _, err := kept("acme enabled", tok); err != nil {
					t.Fatalf("the %s token once acme is enabled: %v", name, err)
				}
			}
		})
	}
}
