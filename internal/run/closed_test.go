package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestClaimLeavesADisabledOrganizationsJobs: while a site admin has an
// organization disabled, no runner claims a job of its runs, older than
// the others or not (they wait, queued); a job claimed before goes on to
// its end; enabled again, the runners waiting for work are woken and its
// jobs are claimed. The organizations are the organization domain's own,
// as the server wires them; on both stores.
func TestClaimLeavesADisabledOrganizationsJobs(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		admin := auth.WithPrincipal(context.Background(), &auth.Principal{Kind: auth.KindUser, UserID: "user-site", Username: "site", SiteAdmin: true})
		orgs := organization.NewService(db)
		for _, name := range []string{"acme", "beta"} {
			if _, err := orgs.Create(admin, organization.CreateOptions{Name: name, Email: "ops@" + name + ".test"}); err != nil {
				t.Fatal(err)
			}
		}
		s := oneWorkspaceService(t, db, nil)
		s.ClosedOrganizationsSQL = orgs.DisabledOrganizationsSQL()
		orgs.OnEnable = append(orgs.OnEnable, func(context.Context, string) { s.Resume() })
		ctx := context.Background()

		// Three runs queued in this order: two of beta, then one of acme.
		at := core.Now().Add(-time.Minute)
		queue := func(id, org string) {
			t.Helper()
			at = at.Add(time.Second)
			queuePlan(t, db, id, org, at, nil)
		}
		queue("run-b1", "beta")
		queue("run-b2", "beta")
		queue("run-a", "acme")
		claim := func(step, want string) {
			t.Helper()
			j, err := s.Claim(ctx, "runner-1")
			got := ""
			if j != nil {
				got = j.RunID
			}
			if err != nil || got != want {
				t.Fatalf("%s: claimed %q, %v; want %q", step, got, err, want)
			}
		}
		status := func(id string) Status {
			t.Helper()
			r, err := s.get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return r.Status
		}

		claim("the oldest job", "run-b1")
		if _, err := orgs.SetDisabled(admin, "beta", true); err != nil {
			t.Fatal(err)
		}
		claim("beta disabled", "run-a")
		claim("beta disabled, acme's job taken", "")
		if got := status("run-b2"); got != PlanQueued {
			t.Fatalf("beta's queued run while beta is disabled: %s, want plan_queued", got)
		}
		// The plan claimed before beta was disabled is left to its end.
		if _, err := s.FinishPlan(ctx, "job-run-b1", "runner-1", PlanResult{}); err != nil {
			t.Fatalf("finishing a plan claimed before its organization was disabled: %v", err)
		}
		if got := status("run-b1"); got != PlannedAndFinished {
			t.Fatalf("beta's run claimed before it was disabled: %s, want planned_and_finished", got)
		}

		waiter := s.WaitForClaim(QueueRuns, "")
		defer waiter.Leave()
		if _, err := orgs.SetDisabled(admin, "beta", false); err != nil {
			t.Fatal(err)
		}
		select {
		case <-waiter.C():
			waiter.Roused()
		case <-time.After(10 * time.Second):
			t.Fatal("enabling beta again woke no claim waiting for work")
		}
		claim("beta enabled again", "run-b2")
		waiter.Claimed(true)
	})
}
