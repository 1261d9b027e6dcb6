package ui_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// The teams page lists every organization permission a team holds,
// joined without a trailing separator, and says the owners team has full
// access.
func TestTeamsPageShowsOrganizationAccess(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	for name, access := range map[string]*tfe.OrganizationAccessOptions{
		"policy": {ManagePolicies: tfe.Bool(true), ManageVCSSettings: tfe.Bool(true)},
		"ops":    {ManageWorkspaces: tfe.Bool(true)},
		"none":   nil,
	} {
		if _, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access, Visibility: tfe.String("organization")}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := getPage(t, e, e.Token, "/app/acme/teams")
	for team, want := range map[string]string{
		"policy": "<small>manage policies · manage vcs settings</small>",
		"ops":    "<small>manage workspaces</small>",
		"none":   "<small>none</small>",
		"owners": "<small>owners: full access</small>",
	} {
		if row := between(body, `<tr data-team="`+team+`">`, "</tr>"); !strings.Contains(row, want) {
			t.Errorf("team %s: %q, want %s", team, row, want)
		}
	}
}
