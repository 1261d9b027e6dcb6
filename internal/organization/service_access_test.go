package organization_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestServiceAsksTheModelToChangeOrDelete: the organization service
// decides Update and Delete by the model's OrgManage, as the route guard
// does, not by itself: called directly (no guard in front), the
// organization's token, which HCP Terraform's owners-only settings and
// deletion refuse, changes and deletes nothing, nor does a team with every
// other organization access; an owner's user token and the owners team's
// token may.
func TestServiceAsksTheModelToChangeOrDelete(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		managers, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("managers"), OrganizationAccess: &tfe.OrganizationAccessOptions{
			ManageMembership: tfe.Bool(true), ManageTeams: tfe.Bool(true), ManageWorkspaces: tfe.Bool(true), ManageProjects: tfe.Bool(true),
		}})
		if err != nil {
			t.Fatal(err)
		}
		ownersToken, err := c.TeamTokens.Create(ctx, owners.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		tokens := map[string]string{"owners-team-token": ownersToken.Token, "organization-token": orgToken.Token}
		for who, tm := range map[string]*tfe.Team{"owner": owners.Items[0], "manager": managers} {
			_, m := e.UserClient(t, "acme", who+"@acme.test", tm)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			tokens[who] = secret
		}
		as := func(who string) context.Context {
			p, err := e.Server.Auth.Authenticate(ctx, tokens[who])
			if err != nil {
				t.Fatal(err)
			}
			return authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		}
		email := "new@acme.test"
		for who, allowed := range map[string]bool{"owner": true, "owners-team-token": true, "organization-token": false, "manager": false} {
			_, err := e.Server.Orgs.Update(as(who), "acme", organization.UpdateOptions{Email: &email})
			if allowed && err != nil {
				t.Errorf("%s updating acme: %v", who, err)
			}
			if !allowed && core.KindOf(err) != core.KindForbidden {
				t.Errorf("%s updating acme: %v, want forbidden", who, err)
			}
		}
		// Refused deletions leave acme; then its owners team's token
		// deletes it.
		for _, who := range []string{"organization-token", "manager"} {
			if err := e.Server.Orgs.Delete(as(who), "acme"); core.KindOf(err) != core.KindForbidden {
				t.Errorf("%s deleting acme: %v, want forbidden", who, err)
			}
		}
		if _, err := e.Server.Orgs.Get(as("owner"), "acme"); err != nil {
			t.Fatalf("acme after the refused deletions: %v", err)
		}
		if err := e.Server.Orgs.Delete(as("owners-team-token"), "acme"); err != nil {
			t.Errorf("the owners team's token deleting acme: %v", err)
		}
	})
}
