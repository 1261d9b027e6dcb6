package variable_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestVariableSetsNeedReadVariablesWhereTheyApply: a variable set, its
// variables and the variable set lists show a set to those who manage
// variable sets, and otherwise (as HCP Terraform documents it: reading a
// set's variables on a workspace needs read variables there) to those who
// may read the variables of a workspace the set applies to: global sets,
// sets applied to such a workspace or its project, sets applied to a
// workspace of a project whose variables they may read. A set applied only
// where the caller may not read variables is a 404 by ID and missing from
// every list, with its values; so for a member with no workspace at all.
func TestVariableSetsNeedReadVariablesWhereTheyApply(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		project := func(name string) *tfe.Project {
			p, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: name})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}
		prjA, hidden := project("prja"), project("hidden")
		workspace := func(name string, p *tfe.Project) *tfe.Workspace {
			w, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(name), Project: p})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}
		wsread, wssecret, wsa := workspace("wsread", nil), workspace("wssecret", nil), workspace("wsa", prjA)

		sets := map[string]string{} // name -> ID
		varset := func(name string, global bool, value string, apply func(id string) error) {
			t.Helper()
			vs, err := c.VariableSets.Create(ctx, org, &tfe.VariableSetCreateOptions{Name: tfe.String(name), Global: tfe.Bool(global)})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.VariableSetVariables.Create(ctx, vs.ID, &tfe.VariableSetVariableCreateOptions{Key: tfe.String("k"),
				Value: tfe.String(value), Category: tfe.Category(tfe.CategoryTerraform)}); err != nil {
				t.Fatal(err)
			}
			if apply != nil {
				if err := apply(vs.ID); err != nil {
					t.Fatal(err)
				}
			}
			sets[name] = vs.ID
		}
		toWorkspace := func(w *tfe.Workspace) func(string) error {
			return func(id string) error {
				return c.VariableSets.ApplyToWorkspaces(ctx, id, &tfe.VariableSetApplyToWorkspacesOptions{Workspaces: []*tfe.Workspace{w}})
			}
		}
		toProject := func(p *tfe.Project) func(string) error {
			return func(id string) error {
				return c.VariableSets.ApplyToProjects(ctx, id, tfe.VariableSetApplyToProjectsOptions{Projects: []*tfe.Project{p}})
			}
		}
		varset("global", true, "global-value", nil)
		varset("onread", false, "read-value", toWorkspace(wsread))
		varset("onsecret", false, "topsecret-workspace", toWorkspace(wssecret))
		varset("onhidden", false, "topsecret-project", toProject(hidden))
		varset("onprja", false, "prja-value", toProject(prjA))
		varset("onwsa", false, "wsa-value", toWorkspace(wsa))

		token := func(name string, access *tfe.OrganizationAccessOptions, grant func(*tfe.Team)) string {
			t.Helper()
			var teams []*tfe.Team
			if access != nil || grant != nil {
				tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
				if err != nil {
					t.Fatal(err)
				}
				if grant != nil {
					grant(tm)
				}
				teams = append(teams, tm)
			}
			_, m := e.UserClient(t, org, name+"@acme.test", teams...)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		rita := token("rita", nil, func(tm *tfe.Team) {
			if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: tm, Workspace: wsread}); err != nil {
				t.Fatal(err)
			}
			if _, err := c.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessRead, Team: tm, Project: prjA}); err != nil {
				t.Fatal(err)
			}
		})
		nobody := token("nobody", nil, nil)
		// read-projects reads every project, not the variables in them.
		auditor := token("auditor", &tfe.OrganizationAccessOptions{ReadProjects: tfe.Bool(true)}, nil)

		list := func(token, path string) ([]string, string) {
			t.Helper()
			status, body := e.API(t, token, "GET", path, nil)
			if status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, status, body)
			}
			var doc struct {
				Data []struct {
					Attributes struct{ Name string } `json:"attributes"`
				} `json:"data"`
				Meta struct {
					Pagination struct {
						TotalCount int `json:"total-count"`
					} `json:"pagination"`
				} `json:"meta"`
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, d := range doc.Data {
				names = append(names, d.Attributes.Name)
			}
			slices.Sort(names)
			if doc.Meta.Pagination.TotalCount != len(names) {
				t.Errorf("GET %s counts %d sets, shows %d", path, doc.Meta.Pagination.TotalCount, len(names))
			}
			return names, string(body)
		}
		noSecrets := func(what, body string) {
			t.Helper()
			if strings.Contains(body, "topsecret") {
				t.Errorf("%s shows a value of a set the caller may not read: %s", what, body)
			}
		}

		got, body := list(rita, "/api/v2/organizations/"+org+"/varsets?include=vars")
		noSecrets("rita's variable set list", body)
		if want := []string{"global", "onprja", "onread", "onwsa"}; !slices.Equal(got, want) {
			t.Errorf("rita lists %v, want %v", got, want)
		}
		got, body = list(rita, "/api/v2/projects/"+prjA.ID+"/varsets?include=vars")
		noSecrets("rita's project variable set list", body)
		if want := []string{"onprja"}; !slices.Equal(got, want) {
			t.Errorf("rita lists prja's sets %v, want %v", got, want)
		}
		for _, name := range []string{"onsecret", "onhidden"} {
			for _, path := range []string{"/api/v2/varsets/" + sets[name], "/api/v2/varsets/" + sets[name] + "/relationships/vars"} {
				if status, body := e.API(t, rita, "GET", path, nil); status != http.StatusNotFound {
					t.Errorf("rita GET %s (%s): %d %s, want 404", path, name, status, body)
				}
			}
		}
		for _, name := range []string{"global", "onread", "onprja", "onwsa"} {
			if status, body := e.API(t, rita, "GET", "/api/v2/varsets/"+sets[name]+"/relationships/vars", nil); status != http.StatusOK {
				t.Errorf("rita reading the variables of %s: %d %s", name, status, body)
			}
		}

		if got, body := list(nobody, "/api/v2/organizations/"+org+"/varsets?include=vars"); len(got) != 0 || strings.Contains(body, "-value") {
			t.Errorf("a member with no workspace lists %v", got)
		}
		if status, _ := e.API(t, nobody, "GET", "/api/v2/varsets/"+sets["global"], nil); status != http.StatusNotFound {
			t.Errorf("a member with no workspace reading the global set: %d, want 404", status)
		}

		got, body = list(auditor, "/api/v2/projects/"+hidden.ID+"/varsets?include=vars")
		noSecrets("read-projects' project variable set list", body)
		if len(got) != 0 {
			t.Errorf("read-projects lists the hidden project's sets %v", got)
		}

		if got, _ := list("", "/api/v2/organizations/"+org+"/varsets"); len(got) != len(sets) {
			t.Errorf("the site admin lists %v", got)
		}
	})
}
