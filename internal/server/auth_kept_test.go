package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestKeptPrincipalsFollowEveryChange: two replicas on one database (both
// stores) keep a user token's principal between requests (internal/auth,
// cache.go), so that its requests read one row to authenticate. Each kind
// of change a principal is made of, made through one replica or straight in
// the store, shows on the very next request on both: teams joined and left,
// a new organization, an organization refusing user tokens, a renamed
// organization, a team's organization permissions, site admin rights, an
// expiry (a deleted token: TestRevocationReachesEveryReplica). After each
// change every replica's principal is the one the domains say, and the
// requests after the first authenticate from the kept principal again.
func TestKeptPrincipalsFollowEveryChange(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			a := testenv.New(t, testenv.Options{Store: st})
			b := testenv.New(t, testenv.ReplicaOf(t, a))
			replicas := []*testenv.Env{a, b}
			ctx := context.Background()
			acme := testenv.NewOrg(t, a.Client, "acme")
			devs, err := a.Client.Teams.Create(ctx, acme.Name, tfe.TeamCreateOptions{Name: tfe.String("devs"),
				OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
			if err != nil {
				t.Fatal(err)
			}
			m, err := a.Client.OrganizationMemberships.Create(ctx, acme.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("dev@acme.test"), Teams: []*tfe.Team{devs}})
			if err != nil {
				t.Fatal(err)
			}
			user := m.User
			tok, secret, err := a.Server.Auth.CreateToken(ctx, a.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: user.ID})
			if err != nil {
				t.Fatal(err)
			}

			// check authenticates on every replica and compares the
			// principal with what the domains say now; the request after
			// the first must be answered from the kept principal: one
			// statement, the epoch's.
			check := func(step string) {
				t.Helper()
				member, owner, err := a.Server.Teams.UserOrganizations(ctx, user.ID)
				if err != nil {
					t.Fatal(err)
				}
				blocked, err := a.Server.Orgs.UserTokensDisabled(ctx, member)
				if err != nil {
					t.Fatal(err)
				}
				var admin bool
				if err := a.Server.DB.QueryRow(ctx, `SELECT is_site_admin FROM users WHERE id = ?`, user.ID).Scan(&admin); err != nil {
					t.Fatal(err)
				}
				slices.Sort(blocked)
				want := fmt.Sprintf("orgs %v, owns %v, refused by %v, site admin %t", member, owner, blocked, admin)
				for i, r := range replicas {
					least := int64(1 << 30)
					for n := range 4 {
						counted, count := core.WithStatementCount(ctx)
						p, err := r.Server.Auth.Authenticate(counted, secret)
						if n > 0 {
							least = min(least, count())
						}
						if err != nil {
							t.Fatalf("%s: replica %d, request %d: %v", step, i, n, err)
						}
						got := fmt.Sprintf("orgs %v, owns %v, refused by %v, site admin %t", p.Orgs, p.Owns, p.UserTokensBlocked, p.SiteAdmin)
						if got != want || p.UserID != user.ID || p.TokenID != tok.ID {
							t.Fatalf("%s: replica %d, request %d: principal %s; the domains say %s", step, i, n, got, want)
						}
						// A caller changing its principal changes no
						// other request's.
						for _, l := range [][]string{p.Orgs, p.Owns, p.UserTokensBlocked} {
							for j := range l {
								l[j] = "changed-by-a-caller"
							}
						}
					}
					if least != 1 {
						t.Errorf("%s: replica %d: a known user token authenticated in %d statements, want 1 (the epoch)", step, i, least)
					}
				}
			}
			check("invited through devs, not yet a member")
			a.Accept(t, m.ID)
			check("a member through devs, the invitation accepted")

			if err := b.Client.TeamMembers.Add(ctx, ownersTeam(t, a, acme.Name).ID, tfe.TeamMemberAddOptions{Usernames: []string{user.Username}}); err != nil {
				t.Fatal(err)
			}
			check("added to owners through replica b")

			beta := testenv.NewOrg(t, a.Client, "beta")
			m2, err := a.Client.OrganizationMemberships.Create(ctx, beta.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("dev@acme.test")})
			if err != nil {
				t.Fatal(err)
			}
			b.Accept(t, m2.ID)
			check("a member of a second organization through replica a")

			if _, err := a.Client.Organizations.Update(ctx, beta.Name, tfe.OrganizationUpdateOptions{Name: tfe.String("gamma")}); err != nil {
				t.Fatal(err)
			}
			check("the second organization renamed through replica a")

			if _, err := b.Server.DB.Exec(ctx, `UPDATE organizations SET user_tokens_enabled = ? WHERE name = ?`, false, "gamma"); err != nil {
				t.Fatal(err)
			}
			check("the second organization refuses user tokens (in the store)")

			if err := a.Client.TeamMembers.Remove(ctx, ownersTeam(t, a, acme.Name).ID, tfe.TeamMemberRemoveOptions{Usernames: []string{user.Username}}); err != nil {
				t.Fatal(err)
			}
			check("removed from owners through replica a")

			// The team's permissions travel with the kept principal (its
			// teams are read by the one query): devs may create
			// workspaces, and once it may not, neither replica lets the
			// member create one.
			clients := []*tfe.Client{a.NewClient(t, secret), b.NewClient(t, secret)}
			for i, c := range clients {
				if _, err := c.Workspaces.Create(ctx, acme.Name, tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("ws-%d", i))}); err != nil {
					t.Fatalf("replica %d: a member of a team that manages workspaces cannot create one: %v", i, err)
				}
			}
			if _, err := b.Client.Teams.Update(ctx, devs.ID, tfe.TeamUpdateOptions{OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(false)}}); err != nil {
				t.Fatal(err)
			}
			for i, c := range clients {
				if _, err := c.Workspaces.Create(ctx, acme.Name, tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("late-%d", i))}); err == nil {
					t.Fatalf("replica %d: a workspace was created after the team lost the permission", i)
				}
			}
			check("the team's permissions changed through replica b")

			if _, err := a.Server.DB.Exec(ctx, `UPDATE users SET is_site_admin = ? WHERE id = ?`, true, user.ID); err != nil {
				t.Fatal(err)
			}
			check("made a site admin (in the store)")

			if _, err := b.Server.DB.Exec(ctx, `UPDATE tokens SET expired_at = ? WHERE id = ?`, core.Micros(core.Now().Add(-time.Second)), tok.ID); err != nil {
				t.Fatal(err)
			}
			for i, r := range replicas {
				if _, err := r.Server.Auth.Authenticate(ctx, secret); core.KindOf(err) != core.KindUnauthorized {
					t.Fatalf("replica %d: a token expired in the store got %v, want it refused", i, err)
				}
			}
		})
	}
}

// TestAuthEpochMovesForKeptKindsOnly: deleting a token raises the
// authentication epoch exactly when principals of its kind are kept
// (auth.KeptKinds, which the store's triggers name again), and then at
// least to the clock; making a token raises it for no kind; and a run,
// with the tokens it makes and deletes, and a token's recorded use leave
// it alone, so that runs do not drop the principals every replica keeps.
func TestAuthEpochMovesForKeptKindsOnly(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		org := testenv.NewOrg(t, e.Client, "acme")
		ws, err := e.Client.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		epoch := func() int64 {
			t.Helper()
			var n int64
			if err := e.Server.DB.QueryRow(ctx, `SELECT n FROM auth_epoch WHERE id = 1`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		before := epoch()
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		testenv.WaitRun(ctx, t, e.Client, r.ID, tfe.RunApplied)
		if after := epoch(); after != before {
			t.Fatalf("a run raised the authentication epoch from %d to %d", before, after)
		}
		for _, kind := range []auth.Kind{auth.KindUser, auth.KindTeam, auth.KindOrganization, auth.KindAuditTrails, auth.KindRun, auth.KindAgent, auth.KindTaskResult, auth.KindTestRun} {
			before := epoch()
			tok, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: kind, Subject: "nobody"})
			if err != nil {
				t.Fatal(err)
			}
			if after := epoch(); after != before {
				t.Fatalf("making a %s token raised the authentication epoch", kind)
			}
			// A use recorded (the subject is nobody: refused or not, the
			// use of a token that exists is recorded first).
			_, _ = e.Server.Auth.Authenticate(ctx, secret)
			var used sql.NullInt64
			if err := e.Server.DB.QueryRow(ctx, `SELECT last_used_at FROM tokens WHERE id = ?`, tok.ID).Scan(&used); err != nil || !used.Valid {
				t.Fatalf("a %s token's use was not recorded (%v)", kind, err)
			}
			if after := epoch(); after != before {
				t.Fatalf("using a %s token raised the authentication epoch", kind)
			}
			clock := core.Micros(core.Now())
			if err := e.Server.Auth.DeleteToken(ctx, e.Server.DB, tok.ID); err != nil {
				t.Fatal(err)
			}
			after := epoch()
			moved, kept := after != before, slices.Contains(auth.KeptKinds, kind)
			if moved != kept {
				t.Errorf("deleting a %s token: the epoch moved %t; principals of the kind kept %t", kind, moved, kept)
			}
			// Raised, it goes to the clock (SQLite's reads milliseconds):
			// a database restored under running replicas cannot bring
			// back a value they kept principals under.
			if moved && after < clock-1000 {
				t.Errorf("deleting a %s token raised the epoch to %d, behind the clock's %d", kind, after, clock)
			}
		}
	})
}

// TestKeptTeamAndOrganizationTokens: team and organization tokens are
// kept too (one statement a request once known), and every change they
// depend on shows on the very next request: a new token TTL policy that
// the token is older than, a renamed organization, a deleted team.
func TestKeptTeamAndOrganizationTokens(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		devs, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		teamTok, err := e.Client.TeamTokens.Create(ctx, devs.ID)
		if err != nil {
			t.Fatal(err)
		}
		orgTok, err := e.Client.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		// authenticate returns the principal after requiring that, once
		// known, the token authenticates in one statement.
		authenticate := func(step, secret string) *auth.Principal {
			t.Helper()
			var p *auth.Principal
			least := int64(1 << 30)
			for n := range 4 {
				counted, count := core.WithStatementCount(ctx)
				var err error
				if p, err = e.Server.Auth.Authenticate(counted, secret); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				if n > 1 {
					least = min(least, count())
				}
			}
			if least != 1 {
				t.Errorf("%s: authenticated in %d statements, want 1 (the epoch)", step, least)
			}
			return p
		}
		if p := authenticate("team token", teamTok.Token); p.Kind != auth.KindTeam || p.TeamID != devs.ID || p.Organization != "acme" || p.OwnersTeam {
			t.Fatalf("team token: principal %+v", p)
		}
		if p := authenticate("organization token", orgTok.Token); p.Kind != auth.KindOrganization || p.Organization != "acme" {
			t.Fatalf("organization token: principal %+v", p)
		}

		if _, err := e.Client.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{Name: tfe.String("acme2")}); err != nil {
			t.Fatal(err)
		}
		if p := authenticate("organization token after the rename", orgTok.Token); p.Organization != "acme2" {
			t.Fatalf("organization token after the rename: principal %+v", p)
		}
		if p := authenticate("team token after the rename", teamTok.Token); p.Organization != "acme2" {
			t.Fatalf("team token after the rename: principal %+v", p)
		}

		// A TTL policy shorter than the tokens' age: both refused at once.
		time.Sleep(5 * time.Millisecond)
		for _, typ := range []string{"team", "organization"} {
			if _, err := e.Server.DB.Exec(ctx, `INSERT INTO token_ttl_policies (id, organization_name, token_type, max_ttl_ms, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
				"ttl-"+typ, "acme2", typ, 1, core.Micros(core.Now()), core.Micros(core.Now())); err != nil {
				t.Fatal(err)
			}
		}
		for name, secret := range map[string]string{"team": teamTok.Token, "organization": orgTok.Token} {
			if _, err := e.Server.Auth.Authenticate(ctx, secret); core.KindOf(err) != core.KindUnauthorized {
				t.Fatalf("a %s token older than its organization's new TTL policy got %v, want it refused", name, err)
			}
		}
		if _, err := e.Server.DB.Exec(ctx, `DELETE FROM token_ttl_policies WHERE organization_name = ?`, "acme2"); err != nil {
			t.Fatal(err)
		}
		authenticate("team token without the policy", teamTok.Token)

		if err := e.Client.Teams.Delete(ctx, devs.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.Auth.Authenticate(ctx, teamTok.Token); core.KindOf(err) != core.KindUnauthorized {
			t.Fatalf("a deleted team's token got %v, want it refused", err)
		}
	})
}
