package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// A run started with a team's token names the team (the header named
// users only), the site admin's names the admin.
func TestRunPageNamesTokenCreators(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	ws := setupApp(t, e)
	ops, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("ops"), Visibility: tfe.String("organization"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	teamToken, err := e.Client.TeamTokens.Create(ctx, ops.ID)
	if err != nil {
		t.Fatal(err)
	}
	for token, want := range map[string]string{
		teamToken.Token: `id="run-creator">team ops<`,
		e.Token:         `id="run-creator">admin<`,
	} {
		rn, err := e.NewClient(t, token).Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, PlanOnly: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		_, body := getPage(t, e, e.Token, "/app/acme/workspaces/app/runs/"+rn.ID)
		if meta := between(body, `id="run-meta"`, `</p>`); !strings.Contains(meta, want) {
			t.Errorf("run %s's header: %s, want %s", rn.ID, meta, want)
		}
	}
}
