package stack_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestStackReadOnceARequest: a request that asks a stack's lists (the
// stack page asks three) reads the stack's row once, through the request
// memo; each list still checks the caller against it. A change made
// through the same context forgets it.
func TestStackReadOnceARequest(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		org := testenv.NewOrg(t, e.Client, "acme")
		prj, err := e.Client.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "p"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := e.Client.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "web", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		admin := authz.WithModel(auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true}), e.Server.Authz)
		svc := e.Server.Stacks
		page := func(ctx context.Context) {
			if _, err := svc.GetStack(ctx, st.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.ListDeployments(ctx, st.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.RecentRuns(ctx, st.ID, 10); err != nil {
				t.Fatal(err)
			}
			if _, err := svc.ListSpeculativeRuns(ctx, st.ID, 20); err != nil {
				t.Fatal(err)
			}
		}
		// The page's own statements (not a background loop's).
		cost := func(memo func(context.Context) context.Context) int64 {
			ctx, count := core.WithStatementCount(memo(admin))
			page(ctx)
			return count()
		}
		without := cost(func(c context.Context) context.Context { return c })
		with := cost(core.WithMemo)
		if without-with != 3 {
			t.Errorf("the stack's lists cost %d statements with a request memo and %d without; want 3 fewer (the stack read once, not four times)", with, without)
		}

		// Renamed through a memoized context, the stack reads as renamed.
		mctx := core.WithMemoUntilWrite(admin)
		if _, err := svc.GetStack(mctx, st.ID); err != nil {
			t.Fatal(err)
		}
		name := "web-2"
		if _, err := svc.UpdateStack(mctx, st.ID, stack.StackOptions{Name: &name}); err != nil {
			t.Fatal(err)
		}
		if got, err := svc.GetStack(mctx, st.ID); err != nil || got.Name != name {
			t.Errorf("after the rename the stack reads %v, %v; want %s", got, err, name)
		}
	})
}
