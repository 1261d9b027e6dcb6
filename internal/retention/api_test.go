package retention_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestPolicyAPI: what go-tfe's own tests do not ask of the data retention
// policy routes. A workspace or organization without a policy answers its
// relationship with a 404 saying so, and its document has no such
// relationship (as a workspace that is not locked has no locked-by); a bad policy (no days, 0 days, a fraction, a type of no
// policy) is a 422 that changes nothing; the legacy PATCH sets a
// delete-older policy and answers in the legacy type; a policy keeps its
// ID while its kind stays; a member who may read the workspace but not
// administer it (nor own the organization) reads the policies and cannot
// set or delete them. Both stores.
func TestPolicyAPI(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		wsPath := "/api/v2/workspaces/" + ws.ID + "/relationships/data-retention-policy"
		orgPath := "/api/v2/organizations/acme/relationships/data-retention-policy"

		for _, p := range []string{wsPath, orgPath} {
			if status, body := e.API(t, "", "GET", p, nil); status != http.StatusNotFound || !strings.Contains(string(body), "no data retention policy") {
				t.Fatalf("GET %s without a policy: %d %s", p, status, body)
			}
		}
		if status, body := e.API(t, "", "GET", "/api/v2/workspaces/"+ws.ID, nil); status != http.StatusOK || strings.Contains(string(body), `data-retention-policy`) {
			t.Fatalf("the workspace's document without a policy: %d %s", status, body)
		}

		for _, bad := range []string{
			`{"data":{"type":"data-retention-policy-delete-olders","attributes":{}}}`,
			`{"data":{"type":"data-retention-policy-delete-olders","attributes":{"delete-older-than-n-days":0}}}`,
			`{"data":{"type":"data-retention-policy-delete-olders","attributes":{"delete-older-than-n-days":1.5}}}`,
			`{"data":{"type":"data-retention-policy-delete-olders","attributes":{"delete-older-than-n-days":"7"}}}`,
			`{"data":{"type":"data-retention-policy-keep-forevers"}}`,
		} {
			for _, p := range []string{wsPath, orgPath} {
				if status, body := e.API(t, "", "POST", p, bad); status != http.StatusUnprocessableEntity {
					t.Errorf("POST %s %s: %d %s, want 422", p, bad, status, body)
				}
			}
		}
		if choice, err := c.Workspaces.ReadDataRetentionPolicyChoice(ctx, ws.ID); err != nil || choice != nil {
			t.Fatalf("after the refused policies: %+v %v", choice, err)
		}

		//lint:ignore SA1019 the legacy PATCH is what this line tests: older clients still send it.
		legacy, err := c.Workspaces.SetDataRetentionPolicy(ctx, ws.ID, tfe.DataRetentionPolicySetOptions{DeleteOlderThanNDays: 7})
		if err != nil || legacy.DeleteOlderThanNDays != 7 || !strings.HasPrefix(legacy.ID, "drp-") {
			t.Fatalf("the legacy PATCH: %+v %v", legacy, err)
		}
		again, err := c.Workspaces.SetDataRetentionPolicyDeleteOlder(ctx, ws.ID, tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 9})
		if err != nil || again.ID != legacy.ID || again.DeleteOlderThanNDays != 9 {
			t.Fatalf("a new number of days: %+v %v, want the ID %s kept", again, err, legacy.ID)
		}
		if _, err := c.Organizations.SetDataRetentionPolicyDontDelete(ctx, "acme", tfe.DataRetentionPolicyDontDeleteSetOptions{}); err != nil {
			t.Fatal(err)
		}

		team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("readers")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		reader, _ := e.UserClient(t, "acme", "reader@acme.test", team)
		if choice, err := reader.Workspaces.ReadDataRetentionPolicyChoice(ctx, ws.ID); err != nil || choice == nil || choice.DataRetentionPolicyDeleteOlder == nil ||
			choice.DataRetentionPolicyDeleteOlder.DeleteOlderThanNDays != 9 {
			t.Fatalf("a member reads the workspace's policy: %+v %v", choice, err)
		}
		if choice, err := reader.Organizations.ReadDataRetentionPolicyChoice(ctx, "acme"); err != nil || choice == nil || choice.DataRetentionPolicyDontDelete == nil {
			t.Fatalf("a member reads the organization's policy: %+v %v", choice, err)
		}
		if _, err := reader.Workspaces.SetDataRetentionPolicyDontDelete(ctx, ws.ID, tfe.DataRetentionPolicyDontDeleteSetOptions{}); err == nil {
			t.Fatal("a member who cannot administer the workspace set its policy")
		}
		if err := reader.Workspaces.DeleteDataRetentionPolicy(ctx, ws.ID); err == nil {
			t.Fatal("a member who cannot administer the workspace deleted its policy")
		}
		if _, err := reader.Organizations.SetDataRetentionPolicyDeleteOlder(ctx, "acme", tfe.DataRetentionPolicyDeleteOlderSetOptions{DeleteOlderThanNDays: 1}); err == nil {
			t.Fatal("a member who does not own the organization set its policy")
		}
		if err := reader.Organizations.DeleteDataRetentionPolicy(ctx, "acme"); err == nil {
			t.Fatal("a member who does not own the organization deleted its policy")
		}
		if choice, err := c.Organizations.ReadDataRetentionPolicyChoice(ctx, "acme"); err != nil || choice == nil || choice.DataRetentionPolicyDontDelete == nil {
			t.Fatalf("the organization's policy after the refusals: %+v %v", choice, err)
		}
		if choice, err := c.Workspaces.ReadDataRetentionPolicyChoice(ctx, ws.ID); err != nil || choice == nil || choice.DataRetentionPolicyDeleteOlder == nil ||
			choice.DataRetentionPolicyDeleteOlder.DeleteOlderThanNDays != 9 {
			t.Fatalf("the workspace's policy after the refusals: %+v %v", choice, err)
		}
	})
}
