package audit_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAuditConfigurationIsOwners: the audit configuration is the model's
// OrgManage in the service too, as on its routes: an owner's user token
// and the owners team's token read and change it; the organization's
// token (which reads the trail itself) and a team with every other
// management access do not.
func TestAuditConfigurationIsOwners(t *testing.T) {
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
		for who, allowed := range map[string]bool{"owner": true, "owners-team-token": true, "organization-token": false, "manager": false} {
			p, err := e.Server.Auth.Authenticate(ctx, tokens[who])
			if err != nil {
				t.Fatal(err)
			}
			sctx := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
			_, rerr := e.Server.Audit.Configuration(sctx, "acme")
			_, werr := e.Server.Audit.SetTrailsEnabled(sctx, "acme", true)
			for what, err := range map[string]error{"reading": rerr, "changing": werr} {
				if allowed && err != nil {
					t.Errorf("%s %s the audit configuration: %v", who, what, err)
				}
				if !allowed && core.KindOf(err) != core.KindForbidden {
					t.Errorf("%s %s the audit configuration: %v, want forbidden", who, what, err)
				}
			}
		}
	})
}
