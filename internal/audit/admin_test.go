package audit_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSiteAdminActionsReachTheOrganizationsTrail: a site admin's actions
// on an organization or what it holds (disabling and enabling it,
// force-canceling one of its runs, deleting one of its workspaces) are in
// the site's trail as before and in that organization's trail too, as
// its organization token reads it, with the same request; actions on
// users (a suspension) and an organization's deletion stay the site's
// alone; on both stores.
func TestSiteAdminActionsReachTheOrganizationsTrail(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		acme := testenv.NewOrg(t, c, "acme")
		testenv.NewOrg(t, c, "beta")
		_, dev := e.UserClient(t, "acme", "dev@acme.test")
		ot, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		me, err := c.Users.ReadCurrent(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// A run that waits for an agent (none runs), to force-cancel.
		pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
		if err != nil {
			t.Fatal(err)
		}
		held, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("held"),
			ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
		if err != nil {
			t.Fatal(err)
		}
		testenv.UploadConfig(ctx, t, c, held.ID, `terraform {}`)
		stuck, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: held})
		if err != nil {
			t.Fatal(err)
		}
		doomed, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("doomed")})
		if err != nil {
			t.Fatal(err)
		}

		if _, err := c.Admin.Users.Suspend(ctx, dev.User.ID); err != nil {
			t.Fatal(err)
		}
		for _, disabled := range []bool{true, false} {
			if _, err := c.Admin.Organizations.Update(ctx, "acme", tfe.AdminOrganizationUpdateOptions{IsDisabled: tfe.Bool(disabled)}); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Admin.Runs.ForceCancel(ctx, stuck.ID, tfe.AdminRunForceCancelOptions{Comment: tfe.String("stuck")}); err != nil {
			t.Fatal(err)
		}
		if err := c.Admin.Workspaces.Delete(ctx, doomed.ID); err != nil {
			t.Fatal(err)
		}
		if err := c.Admin.Organizations.Delete(ctx, "beta"); err != nil {
			t.Fatal(err)
		}

		orgEvents, _ := trail(t, e, ot.Token)
		siteEvents, _ := trailAt(t, e, e.Token, "/api/v2/admin/audit-trail")
		// in returns the events of typ, id and action in events, by the
		// organization they belong to ("" for the site's).
		in := func(events []*tfe.AuditTrail, typ, id, action string) map[string][]*tfe.AuditTrail {
			out := map[string][]*tfe.AuditTrail{}
			for _, ev := range events {
				if ev.Resource.Type == typ && ev.Resource.ID == id && ev.Resource.Action == action {
					out[ev.Auth.OrganizationID] = append(out[ev.Auth.OrganizationID], ev)
				}
			}
			return out
		}
		for _, want := range []struct {
			typ, id, action string
			times           int
		}{
			{"organization", "acme", "update", 2},
			{"run", stuck.ID, "force-cancel", 1},
			{"workspace", doomed.ID, "delete", 1},
		} {
			what := want.typ + " " + want.id + " " + want.action
			org, site := in(orgEvents, want.typ, want.id, want.action), in(siteEvents, want.typ, want.id, want.action)
			if len(org) != 1 || len(org[acme.ExternalID]) != want.times {
				t.Fatalf("%s in acme's trail: %v, want %d in acme's (%s)", what, org, want.times, acme.ExternalID)
			}
			if len(site[""]) != want.times || len(site[acme.ExternalID]) != want.times {
				t.Fatalf("%s in the site's trail: %d site events and %d of acme's, want %d of each", what, len(site[""]), len(site[acme.ExternalID]), want.times)
			}
			for i, ev := range org[acme.ExternalID] {
				if ev.Auth.AccessorID != me.ID || ev.Request.ID != site[""][i].Request.ID || ev.Resource.Meta["route"] != site[""][i].Resource.Meta["route"] {
					t.Fatalf("%s in acme's trail: %+v, want the site admin's request %s", what, ev, site[""][i].Request.ID)
				}
			}
		}
		for _, left := range []struct{ typ, id, action string }{{"user", dev.User.ID, "suspend"}, {"organization", "beta", "delete"}} {
			what := left.typ + " " + left.id + " " + left.action
			if got := in(orgEvents, left.typ, left.id, left.action); len(got) != 0 {
				t.Fatalf("%s is in acme's trail: %v", what, got)
			}
			if got := in(siteEvents, left.typ, left.id, left.action); len(got) != 1 || len(got[""]) != 1 {
				t.Fatalf("%s in the site's trail: %v, want one site event", what, got)
			}
		}
	})
}
