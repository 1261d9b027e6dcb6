package authz_test

import (
	"context"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestTokenTTLPolicyRefusesOlderTokens: an organization's token TTL policy
// is enforced when a token is used, not only stored.
func TestTokenTTLPolicyRefusesOlderTokens(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme")
		tm := must(c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String("devs"), OrganizationAccess: &tfe.OrganizationAccessOptions{ReadWorkspaces: tfe.Bool(true)}}))(t)
		team := e.NewClient(t, must(c.TeamTokens.Create(ctx, tm.ID))(t).Token)
		orgTok := e.NewClient(t, must(c.OrganizationTokens.Create(ctx, org.Name))(t).Token)
		if _, err := team.Workspaces.List(ctx, org.Name, nil); err != nil {
			t.Fatalf("a fresh team token: %v", err)
		}
		must(c.OrganizationTokenTTLPolicies.Update(ctx, org.Name, tfe.OrganizationTokenTTLPolicyUpdateOptions{
			Policies: []tfe.OrganizationTokenTTLPolicyUpdateItem{{TokenType: tfe.TokenTypeTeam, MaxTTLMs: 1}},
		}))(t)
		time.Sleep(5 * time.Millisecond)
		if _, err := team.Workspaces.List(ctx, org.Name, nil); err != tfe.ErrUnauthorized {
			t.Fatalf("a team token older than the team TTL policy: %v", err)
		}
		// Other token types keep their own policy.
		if _, err := orgTok.Workspaces.List(ctx, org.Name, nil); err != nil {
			t.Fatalf("the organization token under the default policy: %v", err)
		}
		// A token with an expired-at works until then (an hour ahead: a
		// nearer one could pass before a loaded machine asks) and is
		// refused after it.
		later := time.Now().Add(time.Hour)
		long := e.NewClient(t, must(c.OrganizationTokens.CreateWithOptions(ctx, org.Name, tfe.OrganizationTokenCreateOptions{ExpiredAt: &later}))(t).Token)
		if _, err := long.Workspaces.List(ctx, org.Name, nil); err != nil {
			t.Fatalf("an organization token before its expiry: %v", err)
		}
		exp := time.Now().Add(time.Second)
		short := e.NewClient(t, must(c.OrganizationTokens.CreateWithOptions(ctx, org.Name, tfe.OrganizationTokenCreateOptions{ExpiredAt: &exp}))(t).Token)
		time.Sleep(time.Until(exp) + 100*time.Millisecond)
		if _, err := short.Workspaces.List(ctx, org.Name, nil); err != tfe.ErrUnauthorized {
			t.Fatalf("an expired organization token: %v", err)
		}
	})
}
