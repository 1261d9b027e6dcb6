package organization_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPermissionsAreWhatIsEnforced: each field of an organization's
// permissions says what the route it stands for decides for the caller
// (the guard's decision, asked in-process as the route matrix does, so
// that nothing is created): a member who only reads provisions no no-code
// workspace and manages no run task, a team with manage-run-tasks does,
// a team with write on a project provisions no-code workspaces (and
// creates workspaces there, ProjectCreateWorkspace), and the
// organization's token neither manages no-code modules, provisions, nor
// changes the organization's settings (stacks among them); the owners
// team's token does all an owner does but manage the organization's
// tokens, which take a user token.
func TestPermissionsAreWhatIsEnforced(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		o, err := c.Organizations.Read(ctx, "acme")
		if err != nil || o.DefaultProject == nil {
			t.Fatalf("acme: %+v %v", o, err)
		}
		team := func(name string, access *tfe.OrganizationAccessOptions) *tfe.Team {
			tm, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
			if err != nil {
				t.Fatal(err)
			}
			return tm
		}
		owners, err := c.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
		if err != nil || len(owners.Items) != 1 {
			t.Fatalf("the owners team: %v", err)
		}
		writers, maintainers := team("writers", nil), team("maintainers", nil)
		for tm, access := range map[*tfe.Team]tfe.TeamProjectAccessType{writers: tfe.TeamProjectAccessWrite, maintainers: tfe.TeamProjectAccessMaintain} {
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: access, Team: tm, Project: o.DefaultProject}); err != nil {
				t.Fatal(err)
			}
		}
		teams := map[string]*tfe.Team{
			"owner":      owners.Items[0],
			"reader":     team("readers", &tfe.OrganizationAccessOptions{ReadWorkspaces: tfe.Bool(true), ReadProjects: tfe.Bool(true)}),
			"tasks":      team("tasks", &tfe.OrganizationAccessOptions{ManageRunTasks: tfe.Bool(true)}),
			"modules":    team("modules", &tfe.OrganizationAccessOptions{ManageModules: tfe.Bool(true)}),
			"writer":     writers,
			"maintainer": maintainers,
		}
		tokens := map[string]string{}
		for who, tm := range teams {
			_, m := e.UserClient(t, "acme", who+"@acme.test", tm)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			tokens[who] = secret
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		tokens["organization-token"] = orgToken.Token
		ownersToken, err := c.TeamTokens.Create(ctx, owners.Items[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		tokens["owners-team-token"] = ownersToken.Token

		provision := fmt.Sprintf(`{"data":{"type":"workspaces","attributes":{"name":"nc"},"relationships":{"project":{"data":{"type":"projects","id":%q}}}}}`, o.DefaultProject.ID)
		routes := map[string]struct {
			pattern, body string
		}{
			"can-create-team":            {"POST /api/v2/organizations/{org}/teams", ""},
			"can-create-workspace":       {"POST /api/v2/organizations/{org}/workspaces", ""},
			"can-create-project":         {"POST /api/v2/organizations/{org}/projects", ""},
			"can-destroy":                {"DELETE /api/v2/organizations/{org}", ""},
			"can-traverse":               {"GET /api/v2/organizations/{org}", ""},
			"can-update":                 {"PATCH /api/v2/organizations/{org}", ""},
			"can-update-api-token":       {"POST /api/v2/organizations/{org}/authentication-token", ""},
			"can-manage-run-tasks":       {"POST /api/v2/organizations/{org}/tasks", ""},
			"can-deploy-no-code-modules": {"POST /api/v2/no-code-modules/{id}/workspaces", provision},
			"can-manage-no-code-modules": {"POST /api/v2/organizations/{org}/no-code-modules", ""},
			"can-enable-stacks":          {"PATCH /api/v2/organizations/{org}", ""},
		}
		// What each caller may do, written out (every field not named is
		// false); the owner may do everything.
		want := map[string][]string{
			"reader":  {"can-traverse"},
			"tasks":   {"can-traverse", "can-manage-run-tasks"},
			"modules": {"can-traverse", "can-manage-no-code-modules"},
			// Write on a project does not create workspaces in it;
			// maintain does.
			"writer":             {"can-traverse"},
			"maintainer":         {"can-traverse", "can-deploy-no-code-modules", "can-create-workspace"},
			"organization-token": {"can-traverse", "can-create-team", "can-create-workspace", "can-create-project", "can-manage-run-tasks"},
			// An owner, but the organization's tokens are managed with a
			// user token only.
			"owners-team-token": {"can-create-team", "can-create-workspace", "can-create-project", "can-destroy", "can-traverse", "can-update",
				"can-manage-run-tasks", "can-deploy-no-code-modules", "can-manage-no-code-modules", "can-enable-stacks"},
		}
		guard := &authz.Guard{Service: e.Server.Authz, Routes: authz.Routes}
		for who, token := range tokens {
			st, body := e.API(t, token, "GET", "/api/v2/organizations/acme", nil)
			var doc struct {
				Data struct {
					Attributes struct {
						Permissions map[string]bool `json:"permissions"`
					} `json:"attributes"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &doc); st != http.StatusOK || err != nil {
				t.Fatalf("%s reading acme: status %d (%s) %v", who, st, body, err)
			}
			perms := doc.Data.Attributes.Permissions
			p, err := e.Server.Auth.Authenticate(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			for field, rt := range routes {
				expected := who == "owner"
				for _, f := range want[who] {
					expected = expected || f == field
				}
				shown, ok := perms[field]
				if !ok || shown != expected {
					t.Errorf("%s: permissions say %s %v, want %v", who, field, shown, expected)
				}
				body := []byte(rt.body)
				req := authz.Request{Vals: map[string]string{"org": "acme", "id": "nocode-x"}, Query: func(string) string { return "" }, Body: func() []byte { return body }}
				err := guard.Decide(ctx, p, authz.Routes[rt.pattern], req)
				if enforced := err == nil; enforced != shown {
					t.Errorf("%s: permissions say %s %v, but %s is decided %v (%v)", who, field, shown, rt.pattern, enforced, err)
				}
			}
		}
	})
}
