package stack_test

import (
	"context"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestStackPermissions: stacks follow their project's permissions, both at
// the API (the guard) and in the service's own decisions (lists, reads
// behind other objects). A team with read on project "blue" sees blue's
// stack only and cannot change it; a team with maintain on "blue" manages
// it; nobody sees "green"'s stack without a grant there.
func TestStackPermissions(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "perm")
		blue, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "blue"})
		if err != nil {
			t.Fatal(err)
		}
		green, err := c.Projects.Create(ctx, org.Name, tfe.ProjectCreateOptions{Name: "green"})
		if err != nil {
			t.Fatal(err)
		}
		blueStack, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "b", Project: blue})
		if err != nil {
			t.Fatal(err)
		}
		greenStack, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "g", Project: green})
		if err != nil {
			t.Fatal(err)
		}
		team := func(name string, access tfe.TeamProjectAccessType) (*tfe.Client, string) {
			tm, err := c.Teams.Create(ctx, org.Name, tfe.TeamCreateOptions{Name: tfe.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: access, Team: tm, Project: blue}); err != nil {
				t.Fatal(err)
			}
			tok, err := c.TeamTokens.Create(ctx, tm.ID)
			if err != nil {
				t.Fatal(err)
			}
			return e.NewClient(t, tok.Token), tm.ID
		}
		reader, readerTeam := team("readers", tfe.TeamProjectAccessRead)
		maintainer, _ := team("maintainers", tfe.TeamProjectAccessMaintain)

		// Lists show only the stacks of readable projects.
		l, err := reader.Stacks.List(ctx, org.Name, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].ID != blueStack.ID || l.Pagination == nil || l.Pagination.TotalCount != 1 {
			t.Fatalf("the reader lists %+v, want only %s", l.Items, blueStack.ID)
		}
		if all, err := c.Stacks.List(ctx, org.Name, nil); err != nil || len(all.Items) != 2 {
			t.Fatalf("the site admin lists %+v, %v; want both stacks", all, err)
		}
		if _, err := reader.Stacks.Read(ctx, greenStack.ID); err != tfe.ErrResourceNotFound {
			t.Errorf("reader reading green's stack: %v, want not found", err)
		}
		if st, err := reader.Stacks.Read(ctx, blueStack.ID); err != nil || st.ID != blueStack.ID {
			t.Errorf("reader reading blue's stack: %+v, %v", st, err)
		}
		// Read is not manage.
		_, err = reader.Stacks.Update(ctx, blueStack.ID, tfe.StackUpdateOptions{Description: tfe.String("x")})
		testenv.WantStatus(t, "reader updating", err, "insufficient permissions to manage stacks")
		_, err = reader.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "r", Project: blue})
		testenv.WantStatus(t, "reader creating", err, "insufficient permissions to manage stacks")
		// Maintain manages blue but not green.
		if _, err := maintainer.Stacks.Update(ctx, blueStack.ID, tfe.StackUpdateOptions{Description: tfe.String("by maintainers")}); err != nil {
			t.Errorf("maintainer updating blue's stack: %v", err)
		}
		if _, err := maintainer.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "m", Project: blue}); err != nil {
			t.Errorf("maintainer creating a stack in blue: %v", err)
		}
		if _, err := maintainer.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "m", Project: green}); err == nil {
			t.Error("maintainer of blue created a stack in green")
		}

		// The service asks the model itself, not only the guard: called
		// directly as the reader's team, with the model in its context.
		p := &auth.Principal{Kind: auth.KindTeam, TeamID: readerTeam, Organization: org.Name}
		sctx := authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		if _, err := e.Server.Stacks.GetStack(sctx, greenStack.ID); core.KindOf(err) != core.KindNotFound {
			t.Errorf("service: reader getting green's stack: %v, want not found", err)
		}
		if _, err := e.Server.Stacks.GetStack(sctx, blueStack.ID); err != nil {
			t.Errorf("service: reader getting blue's stack: %v", err)
		}
		if err := e.Server.Stacks.DeleteStack(sctx, blueStack.ID, false); core.KindOf(err) != core.KindForbidden {
			t.Errorf("service: reader deleting blue's stack: %v, want forbidden", err)
		}
	})
}
