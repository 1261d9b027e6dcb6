package server_test

import (
	"context"
	"slices"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRevocationReachesEveryReplica: two servers on one database (both
// stores). A user reads a workspace through a team on both; once the team
// membership is removed through one replica, the very next read on either
// is refused; once the token is deleted through one, the very next request
// with it on either is a 401. Both replicas keep the principal between
// requests (internal/auth, cache.go) until the store's authentication
// epoch moves, as both changes make it.
func TestRevocationReachesEveryReplica(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			a := testenv.New(t, testenv.Options{Store: st})
			b := testenv.New(t, testenv.ReplicaOf(t, a))
			ctx := context.Background()
			org := testenv.NewOrg(t, a.Client, "acme")
			ws, err := a.Client.Workspaces.Create(ctx, org.Name, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
			if err != nil {
				t.Fatal(err)
			}
			devs, err := a.Client.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("devs")})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: devs, Workspace: ws}); err != nil {
				t.Fatal(err)
			}
			m, err := a.Client.OrganizationMemberships.Create(ctx, org.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("dev@acme.test"), Teams: []*tfe.Team{devs}})
			if err != nil {
				t.Fatal(err)
			}
			a.Accept(t, m.ID)
			tok, secret, err := a.Server.Auth.CreateToken(ctx, a.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			replicas := map[string]*tfe.Client{"a": a.NewClient(t, secret), "b": b.NewClient(t, secret)}
			for name, c := range replicas {
				if _, err := c.Workspaces.ReadByID(ctx, ws.ID); err != nil {
					t.Fatalf("replica %s: a team member cannot read the workspace: %v", name, err)
				}
			}

			// Removed from the team through replica b: refused at once on both.
			if err := b.Client.TeamMembers.Remove(ctx, devs.ID, tfe.TeamMemberRemoveOptions{Usernames: []string{m.User.Username}}); err != nil {
				t.Fatal(err)
			}
			for name, c := range replicas {
				if _, err := c.Workspaces.ReadByID(ctx, ws.ID); err == nil {
					t.Fatalf("replica %s: the workspace was read after the team membership was removed", name)
				}
				if _, err := c.Users.ReadCurrent(ctx); err != nil {
					t.Fatalf("replica %s: the token stopped working with the membership: %v", name, err)
				}
			}

			// The token deleted through replica a: a 401 at once on both.
			if err := replicas["a"].UserTokens.Delete(ctx, tok.ID); err != nil {
				t.Fatal(err)
			}
			for name, c := range replicas {
				if _, err := c.Users.ReadCurrent(ctx); err != tfe.ErrUnauthorized {
					t.Fatalf("replica %s: a deleted token got %v, want %v", name, err, tfe.ErrUnauthorized)
				}
			}
		})
	}
}

// TestAuthenticationIsOneQuery: a user token with memberships in two
// organizations, one refusing user tokens, and an invitation into a third
// one's owners team not yet accepted, becomes the same principal through
// the one query as through the domain services one by one.
func TestAuthenticationIsOneQuery(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		acme, beta, gamma := testenv.NewOrg(t, e.Client, "acme"), testenv.NewOrg(t, e.Client, "beta"), testenv.NewOrg(t, e.Client, "gamma")
		owners := ownersTeam(t, e, acme.Name)
		m, err := e.Client.OrganizationMemberships.Create(ctx, acme.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("o@acme.test"), Teams: []*tfe.Team{owners}})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, m.ID)
		mb, err := e.Client.OrganizationMemberships.Create(ctx, beta.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("o@acme.test")})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, mb.ID)
		if _, err := e.Client.OrganizationMemberships.Create(ctx, gamma.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("o@acme.test"),
			Teams: []*tfe.Team{ownersTeam(t, e, gamma.Name)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE organizations SET user_tokens_enabled = ? WHERE name = ?`, false, beta.Name); err != nil {
			t.Fatal(err)
		}
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}
		member, owner, err := e.Server.Teams.UserOrganizations(ctx, m.User.ID)
		if err != nil {
			t.Fatal(err)
		}
		blocked, err := e.Server.Orgs.UserTokensDisabled(ctx, member)
		if err != nil {
			t.Fatal(err)
		}
		// The first time through the query for any token; after it,
		// through the one for a token known to be this user's.
		for i := range 2 {
			p, err := e.Server.Auth.Authenticate(ctx, secret)
			if err != nil {
				t.Fatal(err)
			}
			if p.UserID != m.User.ID || p.Username != m.User.Username || !slices.Equal(p.Orgs, member) || !slices.Equal(p.Owns, owner) ||
				!slices.Equal(p.UserTokensBlocked, blocked) || len(member) != 2 || len(owner) != 1 || len(blocked) != 1 {
				t.Fatalf("authentication %d: principal %+v; services say member of %v, owner of %v, refused by %v", i, p, member, owner, blocked)
			}
		}
	})
}

// TestTeamAndOrganizationTokensInOneQuery: team and organization tokens
// authenticate through the same one query as user tokens (the token TTL
// policy aside): the principal names the team, its organization and
// whether it is the owners team, or the organization; a deleted team's
// token is refused on the very next request.
func TestTeamAndOrganizationTokensInOneQuery(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		owners := ownersTeam(t, e, "acme")
		devs, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
		if err != nil {
			t.Fatal(err)
		}
		orgTok, err := e.Client.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		type who struct {
			kind       auth.Kind
			team, org  string
			ownersTeam bool
		}
		type tokenCase struct {
			name, secret string
			want         who
		}
		cases := []tokenCase{{"organization", orgTok.Token, who{kind: auth.KindOrganization, org: "acme"}}}
		for _, tm := range []*tfe.Team{owners, devs} {
			tok, err := e.Client.TeamTokens.Create(ctx, tm.ID)
			if err != nil {
				t.Fatal(err)
			}
			cases = append(cases, tokenCase{tm.Name, tok.Token, who{kind: auth.KindTeam, team: tm.ID, org: "acme", ownersTeam: tm.Name == "owners"}})
		}
		for _, c := range cases {
			if _, err := e.Server.Auth.Authenticate(ctx, c.secret); err != nil { // records the first use
				t.Fatalf("%s token: %v", c.name, err)
			}
			// The least of a few (its own statements only, not a
			// background loop's): the kept token's cost (a try right
			// after the first use can cost more).
			var p *auth.Principal
			n := int64(1 << 30)
			for range 5 {
				counted, count := core.WithStatementCount(ctx)
				p, err = e.Server.Auth.Authenticate(counted, c.secret)
				if err != nil {
					t.Fatalf("%s token: %v", c.name, err)
				}
				n = min(n, count())
			}
			got := who{kind: p.Kind, team: p.TeamID, org: p.Organization, ownersTeam: p.OwnersTeam}
			if got != c.want || p.TokenID == "" {
				t.Errorf("%s token: principal %+v, want %+v", c.name, got, c.want)
			}
			// The one query, and the organization's token TTL policy.
			if n > 2 {
				t.Errorf("%s token: authenticated in %d queries, want at most 2", c.name, n)
			}
		}
		if err := e.Client.Teams.Delete(ctx, devs.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.Auth.Authenticate(ctx, cases[2].secret); err == nil {
			t.Fatal("a deleted team's token still authenticates")
		}
	})
}

// TestRunTokenInOneQuery: a run token authenticates through the same one
// query as user, team and organization tokens: the principal names the
// run, its workspace and organization, as the run domain says them; once
// the run has finished its token is refused on the very next request.
func TestRunTokenInOneQuery(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		testenv.NewOrg(t, e.Client, "acme")
		ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)
		// Locked by a user, the workspace keeps the run pending: no runner
		// takes it and it does not finish under the test.
		if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		exp := core.Now().Add(time.Hour)
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindRun, Subject: r.ID, ExpiredAt: &exp})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.Server.Auth.Authenticate(ctx, secret); err != nil { // records the first use
			t.Fatal(err)
		}
		// The least of several (its own statements only, not a
		// background loop's), as the kept token's cost.
		var p *auth.Principal
		least := int64(1 << 30)
		for range 5 {
			counted, count := core.WithStatementCount(ctx)
			if p, err = e.Server.Auth.Authenticate(counted, secret); err != nil {
				t.Fatal(err)
			}
			least = min(least, count())
		}
		if least != 1 {
			t.Errorf("a run token authenticated in %d queries, want 1", least)
		}
		wsID, org, err := e.Server.Runs.RunWorkspace(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.Kind != auth.KindRun || p.RunID != r.ID || p.WorkspaceID != wsID || p.Organization != org || wsID != ws.ID || p.TokenID == "" {
			t.Fatalf("principal %+v; the run domain says workspace %s, organization %s", p, wsID, org)
		}
		// A pending run ends at once when canceled.
		if err := e.Client.Runs.Cancel(ctx, r.ID, tfe.RunCancelOptions{}); err != nil {
			t.Fatalf("canceling the pending run: %v", err)
		}
		if _, err := e.Server.Auth.Authenticate(ctx, secret); err == nil {
			t.Fatal("a finished run's token still authenticates")
		}
	})
}

// TestUserTeamsReadWithTheToken: the one query that authenticates a user
// token also reads the user's teams, so that authorizing the request
// costs no second round trip: within the request (its memo) the teams
// of each of the user's organizations are those the team domain reads
// from the store (two teams in one organization, none in another), and
// asking for them costs no query.
func TestUserTeamsReadWithTheToken(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		acme, beta := testenv.NewOrg(t, e.Client, "acme"), testenv.NewOrg(t, e.Client, "beta")
		owners := ownersTeam(t, e, acme.Name)
		devs, err := e.Client.Teams.Create(ctx, acme.Name, tfe.TeamCreateOptions{Name: tfe.String("devs"), Visibility: tfe.String("organization")})
		if err != nil {
			t.Fatal(err)
		}
		m, err := e.Client.OrganizationMemberships.Create(ctx, acme.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("u@acme.test"), Teams: []*tfe.Team{devs, owners}})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, m.ID)
		mb, err := e.Client.OrganizationMemberships.Create(ctx, beta.Name, tfe.OrganizationMembershipCreateOptions{Email: tfe.String("u@acme.test")})
		if err != nil {
			t.Fatal(err)
		}
		e.Accept(t, mb.ID)
		_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, org := range []string{acme.Name, beta.Name} {
			want, err := e.Server.Teams.MemberTeams(ctx, m.User.ID, org)
			if err != nil {
				t.Fatal(err)
			}
			// Each try is a request of its own (a fresh memo), counting
			// its own statements (not a background loop's); the least
			// counts, as the kept token's cost.
			var got []*team.Team
			least := int64(1 << 30)
			for range 3 {
				req := core.WithMemo(ctx)
				if _, err := e.Server.Auth.Authenticate(req, secret); err != nil {
					t.Fatal(err)
				}
				counted, count := core.WithStatementCount(req)
				if got, err = e.Server.Teams.MemberTeams(counted, m.User.ID, org); err != nil {
					t.Fatal(err)
				}
				least = min(least, count())
			}
			if least != 0 {
				t.Errorf("%s: the user's teams cost %d more queries after authentication", org, least)
			}
			if len(got) != len(want) || org == acme.Name && len(got) != 2 {
				t.Fatalf("%s: teams %d after authentication, %d in the store", org, len(got), len(want))
			}
			for i := range got {
				if got[i].ID != want[i].ID || got[i].Name != want[i].Name || got[i].Organization != want[i].Organization ||
					got[i].Settings != want[i].Settings || !got[i].CreatedAt.Equal(want[i].CreatedAt) {
					t.Errorf("%s: team %d after authentication %+v, in the store %+v", org, i, got[i], want[i])
				}
			}
		}
	})
}
