package vcs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcs"
)

func TestMain(m *testing.M) { storetest.Main(m) }

var ctx = context.Background()

// The secrets a leak would show.
const (
	tokenString = "gta_token-secret-7f3a9c"
	clientSec   = "client-secret-d41d8c"
	sshKey      = "-----BEGIN OPENSSH PRIVATE KEY-----\nc3NoLWtleS1tYXRlcmlhbC1xcnM=\n-----END OPENSSH PRIVATE KEY-----\n"
	sshMarker   = "c3NoLWtleS1tYXRlcmlhbC1xcnM"
)

func createBody(provider, token string, extra map[string]any, projects ...string) map[string]any {
	attrs := map[string]any{"service-provider": provider, "api-url": "https://git.example.test/api/v1",
		"http-url": "https://git.example.test/", "oauth-token-string": token, "name": "corp git"}
	for k, v := range extra {
		attrs[k] = v
	}
	data := map[string]any{"type": "oauth-clients", "attributes": attrs}
	if projects != nil {
		var rel []map[string]string
		for _, p := range projects {
			rel = append(rel, map[string]string{"type": "projects", "id": p})
		}
		data["relationships"] = map[string]any{"projects": map[string]any{"data": rel}}
	}
	return map[string]any{"data": data}
}

type doc struct {
	Data struct {
		ID            string         `json:"id"`
		Attributes    map[string]any `json:"attributes"`
		Relationships map[string]struct {
			Data json.RawMessage `json:"data"`
		} `json:"relationships"`
	} `json:"data"`
	Included []struct {
		Type       string         `json:"type"`
		ID         string         `json:"id"`
		Attributes map[string]any `json:"attributes"`
	} `json:"included"`
}

func decode(t *testing.T, b []byte) doc {
	t.Helper()
	var d doc
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("decoding %s: %v", b, err)
	}
	return d
}

func mustAPI(t *testing.T, e *testenv.Env, token string, want int, method, path string, body any) []byte {
	t.Helper()
	status, b := e.API(t, token, method, path, body)
	if status != want {
		t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	return b
}

// TestClientsAPI: a client and its token through the API, on both stores:
// what is returned (never a secret), what is kept (sealed), its projects
// and includes, a replaced token string, an SSH key, and a deletion that
// takes the tokens with it and tells the domains that refer to them.
func TestClientsAPI(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		prj, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "infra"})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := c.Projects.Create(ctx, other, tfe.ProjectCreateOptions{Name: "theirs"})
		if err != nil {
			t.Fatal(err)
		}
		var deleted [][]string
		e.Server.VCS.OnDeleteToken = append(e.Server.VCS.OnDeleteToken, func(_ context.Context, _ store.Q, ids []string) error {
			deleted = append(deleted, ids)
			return nil
		})

		// A project of another organization is not found, and nothing is
		// created.
		mustAPI(t, e, "", http.StatusNotFound, "POST", "/api/v2/organizations/"+org+"/oauth-clients",
			createBody("gitea", tokenString, nil, foreign.ID))
		if l, err := c.OAuthClients.List(ctx, org, nil); err != nil || len(l.Items) != 0 {
			t.Fatalf("clients after a refused create: %v, %v", l, err)
		}

		b := mustAPI(t, e, "", http.StatusCreated, "POST", "/api/v2/organizations/"+org+"/oauth-clients?include=oauth_tokens,projects",
			createBody("gitea", tokenString, map[string]any{"secret": clientSec, "organization-scoped": false}, prj.ID))
		if strings.Contains(string(b), tokenString) || strings.Contains(string(b), clientSec) {
			t.Fatalf("the create response shows a secret: %s", b)
		}
		d := decode(t, b)
		id := d.Data.ID
		if d.Data.Attributes["service-provider"] != "gitea" || d.Data.Attributes["service-provider-display-name"] != "Gitea" ||
			d.Data.Attributes["http-url"] != "https://git.example.test" || d.Data.Attributes["organization-scoped"] != false ||
			d.Data.Attributes["name"] != "corp git" {
			t.Errorf("created client's attributes: %v", d.Data.Attributes)
		}
		var kinds []string
		for _, inc := range d.Included {
			kinds = append(kinds, inc.Type+":"+fmt.Sprint(inc.Attributes["name"]))
		}
		if strings.Join(kinds, ",") != "oauth-tokens:<nil>,projects:infra" {
			t.Errorf("included: %v, want the token and the project named infra", kinds)
		}

		oc, err := c.OAuthClients.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if len(oc.OAuthTokens) != 1 || len(oc.Projects) != 1 || oc.Projects[0].ID != prj.ID {
			t.Fatalf("read client: tokens %v, projects %v", oc.OAuthTokens, oc.Projects)
		}
		tokenID := oc.OAuthTokens[0].ID

		// Sealed at rest: no stored column holds a secret as given.
		for _, q := range []string{`SELECT COALESCE(secret, '') FROM oauth_clients WHERE id = ?`, `SELECT token FROM oauth_tokens WHERE oauth_client_id = ?`} {
			var v string
			if err := e.Server.DB.QueryRow(ctx, q, id).Scan(&v); err != nil {
				t.Fatal(err)
			}
			if v == "" || strings.Contains(v, tokenString) || strings.Contains(v, clientSec) {
				t.Errorf("%s: stored %q, want a sealed value", q, v)
			}
		}
		cred, err := e.Server.VCS.Credential(ctx, e.Server.DB, tokenID)
		if err != nil {
			t.Fatal(err)
		}
		if cred.Token != tokenString || cred.Provider != vcs.Gitea || cred.APIURL != "https://git.example.test/api/v1" ||
			!cred.UsableBy(org, prj.ID) || cred.UsableBy(org, "prj-elsewhere") || cred.UsableBy(other, prj.ID) {
			t.Errorf("credential: %#v (projects %v)", cred, cred.Projects)
		}
		if s := fmt.Sprintf("%v %#v %+v", *cred, cred, *cred); strings.Contains(s, tokenString) {
			t.Errorf("a printed credential shows its token: %s", s)
		}

		// A new token string replaces the token's value, same ID.
		b = mustAPI(t, e, "", http.StatusOK, "PATCH", "/api/v2/oauth-clients/"+id, map[string]any{"data": map[string]any{
			"type": "oauth-clients", "attributes": map[string]any{"oauth-token-string": "gta_replaced", "organization-scoped": true}}})
		if strings.Contains(string(b), "gta_replaced") {
			t.Fatalf("the update response shows the token: %s", b)
		}
		if cred, err = e.Server.VCS.Credential(ctx, e.Server.DB, tokenID); err != nil || cred.Token != "gta_replaced" || !cred.UsableBy(org, "prj-elsewhere") {
			t.Fatalf("after the update: %v, %v", cred, err)
		}

		// An SSH key: checked, never shown, has-ssh-key.
		status, body := e.API(t, "", "PATCH", "/api/v2/oauth-tokens/"+tokenID, map[string]any{"data": map[string]any{
			"type": "oauth-tokens", "attributes": map[string]any{"ssh-key": "not a key"}}})
		if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), "Ssh key is invalid") {
			t.Errorf("an invalid SSH key: %d %s", status, body)
		}
		b = mustAPI(t, e, "", http.StatusOK, "PATCH", "/api/v2/oauth-tokens/"+tokenID, map[string]any{"data": map[string]any{
			"type": "oauth-tokens", "attributes": map[string]any{"ssh-key": sshKey}}})
		if strings.Contains(string(b), sshMarker) || decode(t, b).Data.Attributes["has-ssh-key"] != true {
			t.Errorf("token after its SSH key: %s", b)
		}
		for _, path := range []string{"/api/v2/organizations/" + org + "/oauth-tokens", "/api/v2/oauth-clients/" + id + "/oauth-tokens",
			"/api/v2/oauth-tokens/" + tokenID, "/api/v2/organizations/" + org + "/oauth-clients?include=oauth_tokens"} {
			b := mustAPI(t, e, "", http.StatusOK, "GET", path, nil)
			if !strings.Contains(string(b), tokenID) || strings.Contains(string(b), sshMarker) || strings.Contains(string(b), "gta_replaced") {
				t.Errorf("GET %s: %s", path, b)
			}
		}

		// Projects change through the relationship; a deleted project
		// leaves the client.
		extra, err := c.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "extra"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.OAuthClients.AddProjects(ctx, id, tfe.OAuthClientAddProjectsOptions{Projects: []*tfe.Project{extra}}); err != nil {
			t.Fatal(err)
		}
		mustAPI(t, e, "", http.StatusNotFound, "POST", "/api/v2/oauth-clients/"+id+"/relationships/projects",
			map[string]any{"data": []map[string]string{{"type": "projects", "id": foreign.ID}}})
		if err := c.Projects.Delete(ctx, prj.ID); err != nil {
			t.Fatal(err)
		}
		if oc, err = c.OAuthClients.Read(ctx, id); err != nil || len(oc.Projects) != 1 || oc.Projects[0].ID != extra.ID {
			t.Fatalf("projects after one was deleted: %v, %v", oc, err)
		}

		// Deleting the client deletes its token and tells the hooks.
		if err := c.OAuthClients.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OAuthTokens.Read(ctx, tokenID); err != tfe.ErrResourceNotFound {
			t.Errorf("the token after its client was deleted: %v", err)
		}
		if fmt.Sprint(deleted) != fmt.Sprint([][]string{{tokenID}}) {
			t.Errorf("OnDeleteToken saw %v, want [[%s]]", deleted, tokenID)
		}
	})
}

// TestClientValidation: what a create refuses, each with a 422 that says
// why, and nothing created.
func TestClientValidation(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		org := testenv.NewOrg(t, e.Client, "acme").Name
		for _, tc := range []struct {
			name  string
			body  map[string]any
			match string
		}{
			{"unknown provider", createBody("sourceforge", tokenString, nil), "is not one of ado_server, ado_services"},
			{"no token where Terrace runs no OAuth flow", createBody("gitlab_hosted", "", nil), "oauth-token-string is required for GitLab.com"},
			{"relative URL", createBody("gitea", tokenString, map[string]any{"api-url": "/api/v1"}), "api-url must be an absolute http or https URL"},
			{"credentials in the URL", createBody("gitea", tokenString, map[string]any{"http-url": "https://me:" + tokenString + "@git.test"}),
				"http-url must not hold credentials"},
			{"file URL", createBody("gitea", tokenString, map[string]any{"http-url": "file:///etc/passwd"}), "http-url must be an absolute http or https URL"},
			{"private key for GitHub", createBody("github", tokenString, map[string]any{"private-key": "k"}), "private-key is only for Azure DevOps Server"},
			{"blank name", createBody("gitea", tokenString, map[string]any{"name": "  "}), "name must not be blank"},
			{"empty Bitbucket key", createBody("bitbucket_data_center", "", map[string]any{"key": ""}), "The Consumer Key for Bitbucket Data Center must be present"},
		} {
			status, b := e.API(t, "", "POST", "/api/v2/organizations/"+org+"/oauth-clients", tc.body)
			if status != http.StatusUnprocessableEntity || !strings.Contains(string(b), tc.match) {
				t.Errorf("%s: %d %s, want 422 with %q", tc.name, status, b, tc.match)
			}
			if strings.Contains(string(b), tokenString) {
				t.Errorf("%s: the error shows the token: %s", tc.name, b)
			}
		}
		if l, err := e.Client.OAuthClients.List(ctx, org, nil); err != nil || len(l.Items) != 0 {
			t.Errorf("clients after refused creates: %v, %v", l, err)
		}
	})
}

// TestClientsAccess: who may read and who may change an organization's
// VCS providers: those who manage VCS settings (and the organization's
// token) manage and read them, workspace admins read them, other members
// are refused, callers of another organization find nothing.
func TestClientsAccess(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		oc, err := c.OAuthClients.Create(ctx, org, tfe.OAuthClientCreateOptions{APIURL: tfe.String("https://git.test/api/v1"),
			HTTPURL: tfe.String("https://git.test"), OAuthToken: tfe.String(tokenString), ServiceProvider: tfe.ServiceProvider("gitea")})
		if err != nil {
			t.Fatal(err)
		}
		orgToken, err := c.OrganizationTokens.Create(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		user := func(org, name string, access *tfe.OrganizationAccessOptions, wsAccess tfe.AccessType) string {
			t.Helper()
			var teams []*tfe.Team
			if access != nil || wsAccess != "" {
				tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
				if err != nil {
					t.Fatal(err)
				}
				if wsAccess != "" {
					if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(wsAccess), Team: tm, Workspace: ws}); err != nil {
						t.Fatal(err)
					}
				}
				teams = append(teams, tm)
			}
			_, m := e.UserClient(t, org, name+"@"+org+".test", teams...)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return secret
		}
		for _, tc := range []struct {
			who          string
			token        string
			read, create int
		}{
			{"a workspace reader", user(org, "reader", nil, tfe.AccessRead), http.StatusForbidden, http.StatusForbidden},
			{"a workspace admin", user(org, "wsadmin", nil, tfe.AccessAdmin), http.StatusOK, http.StatusForbidden},
			{"a VCS settings manager", user(org, "vcs", &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)}, ""), http.StatusOK, http.StatusCreated},
			{"a member of another organization", user(other, "stranger", nil, ""), http.StatusNotFound, http.StatusNotFound},
			{"the organization's token", orgToken.Token, http.StatusOK, http.StatusCreated},
		} {
			for _, path := range []string{"/api/v2/organizations/" + org + "/oauth-clients", "/api/v2/oauth-clients/" + oc.ID,
				"/api/v2/organizations/" + org + "/oauth-tokens", "/api/v2/oauth-tokens/" + oc.OAuthTokens[0].ID} {
				if status, b := e.API(t, tc.token, "GET", path, nil); status != tc.read {
					t.Errorf("%s: GET %s: %d %s, want %d", tc.who, path, status, b, tc.read)
				}
			}
			status, b := e.API(t, tc.token, "POST", "/api/v2/organizations/"+org+"/oauth-clients", createBody("gitea", tokenString, nil))
			if status != tc.create {
				t.Errorf("%s: creating a client: %d %s, want %d", tc.who, status, b, tc.create)
			}
			if status == http.StatusCreated {
				id := decode(t, b).Data.ID
				if status, b := e.API(t, tc.token, "DELETE", "/api/v2/oauth-clients/"+id, nil); status != http.StatusNoContent {
					t.Errorf("%s: deleting its client: %d %s, want 204", tc.who, status, b)
				}
				continue
			}
			// Those who may not create may not delete: a reader of the
			// token is refused, others as when reading.
			want := tc.read
			if want == http.StatusOK {
				want = http.StatusForbidden
			}
			if status, b := e.API(t, tc.token, "DELETE", "/api/v2/oauth-tokens/"+oc.OAuthTokens[0].ID, nil); status != want {
				t.Errorf("%s: deleting the token: %d %s, want %d", tc.who, status, b, want)
			}
		}
		if _, err := c.OAuthTokens.Read(ctx, oc.OAuthTokens[0].ID); err != nil {
			t.Errorf("the token after refused deletions: %v", err)
		}
	})
}

// TestConnectRefusals: a workspace's vcs-repo is checked before anything
// is kept or any host is asked: each refusal says why, and no workspace
// is created.
func TestConnectRefusals(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		gitea, bitbucket := unreachable(t, c, org, "gitea", true), unreachable(t, c, org, "bitbucket_hosted", true)
		scoped, foreign := unreachable(t, c, org, "gitea", false), unreachable(t, c, other, "gitea", true)
		for _, tc := range []struct {
			name   string
			repo   map[string]any
			status int
			match  string
		}{
			{"no identifier", map[string]any{"oauth-token-id": gitea}, 422, "identifier is required"},
			{"a path for an identifier", map[string]any{"identifier": "../etc", "oauth-token-id": gitea}, 422, "must be owner/name"},
			{"no token", map[string]any{"identifier": "acme/infra"}, 422, "oauth-token-id is required"},
			{"a token of another organization", map[string]any{"identifier": "acme/infra", "oauth-token-id": foreign}, 404, "not found"},
			{"a client scoped to other projects", map[string]any{"identifier": "acme/infra", "oauth-token-id": scoped}, 422, "scoped to other projects"},
			{"a provider Terrace does not reach", map[string]any{"identifier": "acme/infra", "oauth-token-id": bitbucket}, 422, "does not connect workspaces to Bitbucket Cloud"},
			{"a bad branch", map[string]any{"identifier": "acme/infra", "oauth-token-id": gitea, "branch": "a..b"}, 422, "not a valid git branch name"},
			{"a bad tags-regex", map[string]any{"identifier": "acme/infra", "oauth-token-id": gitea, "tags-regex": "v(1"}, 422, "not a valid regular expression"},
			{"a GitHub App", map[string]any{"identifier": "acme/infra", "github-app-installation-id": "ghain-1"}, 422, "GitHub App installations are not supported"},
			{"an unreachable host", map[string]any{"identifier": "acme/infra", "oauth-token-id": gitea}, 422, "acme/infra"},
		} {
			status, b := e.API(t, "", "POST", "/api/v2/organizations/"+org+"/workspaces", map[string]any{"data": map[string]any{
				"type": "workspaces", "attributes": map[string]any{"name": "app", "vcs-repo": tc.repo}}})
			if status != tc.status || !strings.Contains(string(b), tc.match) {
				t.Errorf("%s: %d %s, want %d with %q", tc.name, status, b, tc.status, tc.match)
			}
			if strings.Contains(string(b), tokenString) {
				t.Errorf("%s: the answer shows the token: %s", tc.name, b)
			}
		}
		if _, err := c.Workspaces.Read(ctx, org, "app"); err != tfe.ErrResourceNotFound {
			t.Errorf("the workspace after refused connections: %v, want none", err)
		}
	})
}

// unreachable makes a VCS provider of org whose host does not exist
// (git.invalid) and returns its token's ID: what is refused before the
// host is asked is refused with it, and the rest fails reaching the host.
func unreachable(t *testing.T, c *tfe.Client, org, provider string, orgScoped bool) string {
	t.Helper()
	oc, err := c.OAuthClients.Create(ctx, org, tfe.OAuthClientCreateOptions{APIURL: tfe.String("https://git.invalid/api/v1"),
		HTTPURL: tfe.String("https://git.invalid"), OAuthToken: tfe.String(tokenString), ServiceProvider: tfe.ServiceProvider(tfe.ServiceProviderType(provider)),
		OrganizationScoped: tfe.Bool(orgScoped)})
	if err != nil {
		t.Fatal(err)
	}
	return oc.OAuthTokens[0].ID
}

// TestModuleConnectRefusals: every refusal of a VCS-backed registry
// module that needs no host, as a 4xx naming the cause, with no module
// made and the token never shown (TestVCSBackedModule in internal/e2e
// publishes from a real Gitea).
func TestModuleConnectRefusals(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		gitea, scoped, foreign := unreachable(t, c, org, "gitea", true), unreachable(t, c, org, "gitea", false), unreachable(t, c, other, "gitea", true)
		const repo = "acme/terraform-null-net"
		for _, tc := range []struct {
			name, path string
			attrs      map[string]any
			status     int
			match      string
		}{
			{"no vcs-repo", "", map[string]any{}, 422, "vcs-repo is required"},
			{"no identifier", "", map[string]any{"vcs-repo": map[string]any{"oauth-token-id": gitea}}, 422, "identifier is required"},
			{"a repository not named for a module", "", map[string]any{"vcs-repo": map[string]any{"identifier": "acme/modules", "oauth-token-id": gitea}}, 422, "send the module's name and provider"},
			{"a path for an identifier", "", map[string]any{"name": "net", "provider": "null", "vcs-repo": map[string]any{"identifier": "../etc", "oauth-token-id": gitea}}, 422, "must be owner/name"},
			{"no token", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo}}, 422, "oauth-token-id is required"},
			{"tags and a branch", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "tags": true, "branch": "main"}}, 422, "not both"},
			{"a bad branch", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "branch": "a..b"}}, 422, "not a valid git branch name"},
			{"a source directory out of the repository", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "source-directory": "src/../../etc"}}, 422, "not a folder of the repository"},
			{"a bad tag prefix", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "tag-prefix": "v*"}}, 422, "tag-prefix"},
			{"a tags-regex", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "tags-regex": "^v"}}, 422, "tags-regex is a workspace's"},
			{"submodules", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "ingress-submodules": true}}, 422, "does not fetch submodules yet"},
			{"a GitHub App", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "github-app-installation-id": "ghain-1"}}, 422, "GitHub App installations are not supported"},
			{"module tests on agents without a pool", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea}, "test-config": map[string]any{"tests-enabled": true, "agent-execution-mode": "agent"}}, 422, "needs the agent-pool-id"},
			{"a bad initial version", "", map[string]any{"initial-version": "one", "vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "branch": "main"}}, 422, "initial-version"},
			{"another organization in the body", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea, "organization-name": other}}, 422, "is not the organization"},
			{"a token of another organization", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": foreign}}, 404, "not found"},
			{"a client scoped to projects", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": scoped}}, 422, "scoped to projects"},
			{"an unreachable host", "", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": gitea}}, 422, repo},
			// The legacy route: the organization is the token's.
			{"a token of an organization the caller does not manage", "/api/v2/registry-modules", map[string]any{"vcs-repo": map[string]any{"identifier": repo, "oauth-token-id": "ot-missing"}}, 404, "not found"},
		} {
			path := tc.path
			if path == "" {
				path = "/api/v2/organizations/" + org + "/registry-modules/vcs"
			}
			status, b := e.API(t, "", "POST", path, map[string]any{"data": map[string]any{"type": "registry-modules", "attributes": tc.attrs}})
			if status != tc.status || !strings.Contains(string(b), tc.match) {
				t.Errorf("%s: %d %s, want %d with %q", tc.name, status, b, tc.status, tc.match)
			}
			if strings.Contains(string(b), tokenString) {
				t.Errorf("%s: the answer shows the token: %s", tc.name, b)
			}
		}
		if l, err := c.RegistryModules.List(ctx, org, nil); err != nil || len(l.Items) != 0 {
			t.Errorf("modules after refused connections: %v %v, want none", l, err)
		}
	})
}

// TestPolicySetConnectRefusals: the refusals of a policy set's vcs-repo
// that need no host, with no set made and the token never shown
// (TestVCSBackedPolicySet in internal/e2e connects one to a real Gitea).
func TestPolicySetConnectRefusals(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		other := testenv.NewOrg(t, c, "other").Name
		gitea, scoped, foreign := unreachable(t, c, org, "gitea", true), unreachable(t, c, org, "gitea", false), unreachable(t, c, other, "gitea", true)
		for _, tc := range []struct {
			name   string
			repo   map[string]any
			status int
			match  string
		}{
			{"no identifier", map[string]any{"oauth-token-id": gitea}, 422, "identifier is required"},
			{"no token", map[string]any{"identifier": "acme/policies"}, 422, "oauth-token-id is required"},
			{"a bad branch", map[string]any{"identifier": "acme/policies", "oauth-token-id": gitea, "branch": "-x"}, 422, "not a valid git branch name"},
			{"tags", map[string]any{"identifier": "acme/policies", "oauth-token-id": gitea, "tags-regex": "^v"}, 422, "follows a branch, not tags"},
			{"a token of another organization", map[string]any{"identifier": "acme/policies", "oauth-token-id": foreign}, 404, "not found"},
			{"a client scoped to projects", map[string]any{"identifier": "acme/policies", "oauth-token-id": scoped}, 422, "scoped to projects"},
			{"an unreachable host", map[string]any{"identifier": "acme/policies", "oauth-token-id": gitea}, 422, "acme/policies"},
		} {
			status, b := e.API(t, "", "POST", "/api/v2/organizations/"+org+"/policy-sets", map[string]any{"data": map[string]any{
				"type": "policy-sets", "attributes": map[string]any{"name": "guard", "kind": "opa", "vcs-repo": tc.repo}}})
			if status != tc.status || !strings.Contains(string(b), tc.match) {
				t.Errorf("%s: %d %s, want %d with %q", tc.name, status, b, tc.status, tc.match)
			}
			if strings.Contains(string(b), tokenString) {
				t.Errorf("%s: the answer shows the token: %s", tc.name, b)
			}
		}
		if l, err := c.PolicySets.List(ctx, org, nil); err != nil || len(l.Items) != 0 {
			t.Errorf("policy sets after refused connections: %v %v, want none", l, err)
		}
	})
}

// TestClientListCostIsFlat: listing an organization's clients reads their
// tokens and projects in statements of their own, not per client (the new
// workspace form lists them on every view).
func TestClientListCostIsFlat(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		org := testenv.NewOrg(t, e.Client, "acme").Name
		cost := func() int64 {
			t.Helper()
			return e.RequestStatements(t, func() {
				if l, err := e.Client.OAuthClients.List(ctx, org, nil); err != nil || len(l.Items) == 0 {
					t.Fatalf("listing: %v, %v", l, err)
				}
			})
		}
		unreachable(t, e.Client, org, "gitea", true)
		one := cost()
		for range 5 {
			unreachable(t, e.Client, org, "gitea", true)
		}
		if six := cost(); six != one {
			t.Errorf("listing 1 client took %d statements, 6 took %d: want the same", one, six)
		}
	})
}
