package team_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestRemovingMembers: who removes whom from an organization
// (OrgRemoveMember). As HCP Terraform documents manage-membership ("invite
// users to the organization, remove users from the organization", with
// visibility into all of the user's teams), a team with it removes a
// member, but not one in a secret team it cannot see nor an owner (only
// owners change the owners team); a plain member removes only themselves;
// the organization's token removes anyone but the last owner.
func TestRemovingMembers(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		team := func(name, visibility string, access *tfe.OrganizationAccessOptions) *tfe.Team {
			tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(name), Visibility: tfe.String(visibility), OrganizationAccess: access})
			if err != nil {
				t.Fatal(err)
			}
			return tm
		}
		managers := team("managers", "organization", &tfe.OrganizationAccessOptions{ManageMembership: tfe.Bool(true)})
		hidden := team("hidden", "secret", nil)
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		manager, _ := e.UserClient(t, "acme", "manager@acme.test", managers)
		bob, _ := e.UserClient(t, "acme", "bob@acme.test")
		eve, eveM := e.UserClient(t, "acme", "eve@acme.test")
		_, alice := e.UserClient(t, "acme", "alice@acme.test")
		_, carol := e.UserClient(t, "acme", "carol@acme.test", hidden)
		_, dave := e.UserClient(t, "acme", "dave@acme.test", owners.Items[0])
		_, frank := e.UserClient(t, "acme", "frank@acme.test")

		if err := manager.OrganizationMemberships.Delete(ctx, alice.ID); err != nil {
			t.Errorf("manage-membership removing a member: %v", err)
		}
		err = manager.OrganizationMemberships.Delete(ctx, carol.ID)
		testenv.WantStatus(t, "manage-membership removing a member of a secret team", err, "forbidden")
		err = manager.OrganizationMemberships.Delete(ctx, dave.ID)
		testenv.WantStatus(t, "manage-membership removing an owner", err, "forbidden")
		err = bob.OrganizationMemberships.Delete(ctx, frank.ID)
		testenv.WantStatus(t, "a plain member removing another", err, "forbidden")
		if err := eve.OrganizationMemberships.Delete(ctx, eveM.ID); err != nil {
			t.Errorf("a member leaving: %v", err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.NewClient(t, orgToken.Token).OrganizationMemberships.Delete(ctx, carol.ID); err != nil {
			t.Errorf("the organization's token removing a member of a secret team: %v", err)
		}
		// What was refused is still there.
		for _, m := range []*tfe.OrganizationMembership{dave, frank} {
			if _, err := c.OrganizationMemberships.Read(ctx, m.ID); err != nil {
				t.Errorf("membership %s after a refused removal: %v", m.ID, err)
			}
		}
	})
}
