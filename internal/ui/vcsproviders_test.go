package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// fillForm sets the fields of the form sel (by name) as a person typing
// them would.
func fillForm(tb *tab, sel string, fields map[string]string) {
	tb.t.Helper()
	for name, v := range fields {
		js := fmt.Sprintf(`(function(){var e=document.querySelector(%q).elements[%q];if(!e)return false;e.value=%q;return e.value===%q})()`, sel, name, v, v)
		if !must(tb, chromedp.Evaluate[bool](js)) {
			tb.t.Fatalf("the form %s has no field %s taking %q", sel, name, v)
		}
	}
}

// fieldValue is the value of the field name of the form sel.
func fieldValue(tb *tab, sel, name string) string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q).elements[%q].value`, sel, name)))
}

// postFrom posts fields (and the page's CSRF token) to path from the page
// the tab is on, as a form would, and returns the status.
func postFrom(tb *tab, path string, fields map[string]string) int {
	tb.t.Helper()
	body := url.Values{}
	for k, v := range fields {
		body.Set(k, v)
	}
	js := fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, redirect: 'manual',
		body: %q + '&csrf_token=' + encodeURIComponent(document.querySelector('meta[name=csrf-token]').content)}).then(function(r){ return r.status })`,
		path, body.Encode())
	return must(tb, chromedp.Evaluate[int](js, chromedp.EvalAwaitPromise))
}

// vcsClients lists the organization's clients through the API, by name
// (the provider's value when unnamed).
func vcsClients(t *testing.T, e *testenv.Env, org string) map[string]*tfe.OAuthClient {
	t.Helper()
	l, err := e.Client.OAuthClients.List(context.Background(), org, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tfe.OAuthClient{}
	for _, c := range l.Items {
		name := string(c.ServiceProvider)
		if c.Name != nil && *c.Name != "" {
			name = *c.Name
		}
		out[name] = c
	}
	return out
}

// flowClient makes a client with an OAuth application's key and secret
// and no token, to connect through the host's authorization flow, through
// the API (go-tfe insists on a token string), and returns its ID.
func flowClient(t *testing.T, e *testenv.Env, org string, attrs map[string]any) string {
	t.Helper()
	st, body := e.API(t, "", "POST", "/api/v2/organizations/"+org+"/oauth-clients", map[string]any{"data": map[string]any{"type": "oauth-clients", "attributes": attrs}})
	var doc struct {
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &doc); st != http.StatusCreated || err != nil || doc.Data.ID == "" {
		t.Fatalf("creating a client to connect: %d %s", st, body)
	}
	return doc.Data.ID
}

// The organization's VCS providers page, to an owner: each provider made
// through the API with its host, scope and connection; for a provider
// whose OAuth flow Terrace runs, the callback URL to register and,
// once it has an OAuth application, a Connect link. The owner adds one
// through the form, is shown the service's refusal of a form without an
// HTTP URL (what they typed kept, less the secrets), and deletes one. No
// secret given through the API or the form is ever on the page.
func TestVCSProviderPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "payments"})
	if err != nil {
		t.Fatal(err)
	}
	provider := func(p string) *tfe.ServiceProviderType { v := tfe.ServiceProviderType(p); return &v }
	secrets := []string{"ghp-api-pat-secret-1111", "gitea-app-secret-2222", "glpat-api-secret-3333"}
	github, err := e.Client.OAuthClients.Create(ctx, "acme", tfe.OAuthClientCreateOptions{Name: tfe.String("github-main"), ServiceProvider: provider("github"),
		HTTPURL: tfe.String("https://github.com"), APIURL: tfe.String("https://api.github.com"), OAuthToken: tfe.String(secrets[0])})
	if err != nil {
		t.Fatal(err)
	}
	// No name: the page names it by its provider. A key and secret and no
	// token: it waits to be connected through Gitea's authorization flow.
	gitea := flowClient(t, e, "acme", map[string]any{"service-provider": "gitea", "http-url": "https://gitea.example.test",
		"api-url": "https://gitea.example.test/api/v1", "key": "gitea-app-client-id", "secret": secrets[1]})
	// GitLab connects by a personal access token only: no flow, no
	// callback. It is scoped to one project.
	gitlab, err := e.Client.OAuthClients.Create(ctx, "acme", tfe.OAuthClientCreateOptions{Name: tfe.String("gitlab-ops"), ServiceProvider: provider("gitlab_hosted"),
		HTTPURL: tfe.String("https://gitlab.com"), APIURL: tfe.String("https://gitlab.com/api/v4"), OAuthToken: tfe.String(secrets[2]),
		OrganizationScoped: tfe.Bool(false), Projects: []*tfe.Project{prj}})
	if err != nil {
		t.Fatal(err)
	}
	// The authorization flow (vcsconnect.go) keeps the login of whoever
	// authorized Terrace at the host with the token: play its part for
	// the GitHub client's token.
	if _, err := e.Server.DB.Exec(ctx, `UPDATE oauth_tokens SET service_provider_user = ? WHERE oauth_client_id = ?`, "octocat", github.ID); err != nil {
		t.Fatal(err)
	}
	since := func(c *tfe.OAuthClient) string {
		t.Helper()
		tok, err := e.Client.OAuthTokens.Read(ctx, c.OAuthTokens[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		return "since " + tok.CreatedAt.UTC().Format("2006-01-02")
	}
	ownersTeam, err := e.Client.Teams.List(ctx, "acme", &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(ownersTeam.Items) != 1 {
		t.Fatalf("the owners team: %v %v", ownersTeam, err)
	}
	owner := newTab(t, e, userToken(t, e, "acme", "owner@acme.test", ownersTeam.Items[0]))

	// The owner finds the page from the organization's navigation.
	owner.open("/app/acme/workspaces")
	owner.press(`header nav a[href="/app/acme/settings/version-control"]`)
	owner.waitLocation("/app/acme/settings/version-control")
	flow := func(id, what string) string { return e.URL + "/app/vcs/oauth-clients/" + id + "/" + what }
	row := func(id string) string { return `[data-vcs-client="` + id + `"]` }
	for _, c := range []struct{ sel, want string }{
		{row(github.ID) + " .name", "github-main GitHub · " + github.ID},
		{row(github.ID) + " .http-url", "https://github.com"},
		{row(github.ID) + " .scope", "whole organization"},
		{row(github.ID) + " .token", "Connected as octocat " + since(github)},
		{row(github.ID) + " .callback-url", flow(github.ID, "callback")},
		{row(gitea) + " .name", "Gitea Gitea · " + gitea},
		{row(gitea) + " .http-url", "https://gitea.example.test"},
		{row(gitea) + " .token", "Not connected"},
		{row(gitea) + " .callback-url", flow(gitea, "callback")},
		{row(gitea) + " a.connect", "Connect"},
		{row(gitlab.ID) + " .name", "gitlab-ops GitLab.com · " + gitlab.ID},
		{row(gitlab.ID) + " .scope", "1 project"},
		{row(gitlab.ID) + " .token", "Connected (personal access token) " + since(gitlab)},
	} {
		if got := shown(owner, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	// GitHub is connected with a personal access token and has no OAuth
	// application to connect through: no link (vcsconnectoffer_test.go).
	for id, want := range map[string]string{github.ID: "", gitea: flow(gitea, "connect"), gitlab.ID: ""} {
		if got := linkOf(owner, row(id)+" a.connect"); got != want {
			t.Errorf("%s's connect link: %q, want %q", id, got, want)
		}
	}
	if owner.exists(row(gitlab.ID) + " .callback-url") {
		t.Errorf("GitLab, whose flow Terrace does not run, shows a callback URL: %q", shown(owner, row(gitlab.ID)+" .callback-url"))
	}
	if got := linkOf(owner, row(github.ID)+" .http-url a"); got != "https://github.com/" {
		t.Errorf("the GitHub client's HTTP URL links to %q", got)
	}
	noSecrets := func(when string) {
		t.Helper()
		html := owner.html()
		for _, s := range secrets {
			if strings.Contains(html, s) {
				t.Errorf("%s: the page shows the secret %q", when, s)
			}
		}
	}
	noSecrets("the list")
	owner.screenshot("vcs-providers")

	// A provider added through the form, with a personal access token.
	secrets = append(secrets, "forgejo-form-pat-4444")
	fillForm(owner, "#add-vcs-provider", map[string]string{"provider": "forgejo", "name": "forge", "http_url": "https://forgejo.example.test",
		"api_url": "https://forgejo.example.test/api/v1", "token": secrets[3]})
	owner.press("#add-provider")
	if got := shown(owner, `[data-vcs-name="forge"] .token`); !strings.HasPrefix(got, "Connected (personal access token) since ") {
		t.Errorf("the provider added through the form: %q", got)
	}
	if !strings.HasSuffix(owner.location(), "/app/acme/settings/version-control") {
		t.Errorf("after adding, the tab is at %s", owner.location())
	}
	clients := vcsClients(t, e, "acme")
	forge := clients["forge"]
	if len(clients) != 4 || forge == nil || forge.ServiceProvider != "forgejo" || forge.HTTPURL != "https://forgejo.example.test" ||
		forge.APIURL != "https://forgejo.example.test/api/v1" || len(forge.OAuthTokens) != 1 {
		t.Fatalf("the clients after the form: %d, forge %+v", len(clients), forge)
	}
	if got := shown(owner, row(forge.ID)+" .name"); got != "forge Forgejo · "+forge.ID {
		t.Errorf("the added provider's name: %q", got)
	}
	wantPageEvent(t, e, "oauth-client", "create", forge.ID, http.StatusCreated)
	noSecrets("after adding")

	// A form without an HTTP URL: the service's refusal, what was typed
	// kept but the secrets, nothing made.
	secrets = append(secrets, "half-done-pat-5555", "half-done-app-secret-6666")
	fillForm(owner, "#add-vcs-provider", map[string]string{"provider": "github_enterprise", "name": "half-done", "http_url": "",
		"api_url": "https://ghe.example.test/api/v3", "key": "half-done-client-id", "token": secrets[4], "secret": secrets[5]})
	owner.press("#add-provider")
	if got := shown(owner, "#form-error"); got != "HTTP URL is required" {
		t.Errorf("the refusal of a form without an HTTP URL: %q", got)
	}
	for name, want := range map[string]string{"provider": "github_enterprise", "name": "half-done", "http_url": "",
		"api_url": "https://ghe.example.test/api/v3", "key": "half-done-client-id", "token": "", "secret": ""} {
		if got := fieldValue(owner, "#add-vcs-provider", name); got != want {
			t.Errorf("the refused form's %s: %q, want %q", name, got, want)
		}
	}
	noSecrets("the refused form")
	owner.screenshot("vcs-providers-refused")
	if got := vcsClients(t, e, "acme"); len(got) != 4 || got["half-done"] != nil {
		t.Errorf("a refused form made a client: %d clients", len(got))
	}

	// Back from a connection. A failed one is the callback's error page
	// (internal/ui vcsconnect.go): the page prints no text from its URL.
	owner.open("/app/acme/settings/version-control?connected=" + gitea)
	if got := shown(owner, "#connected"); got != "Connected Gitea." {
		t.Errorf("the notice after connecting: %q", got)
	}
	owner.open("/app/acme/settings/version-control?error=" + url.QueryEscape("the host said no") + "&connected=oc-unknown")
	if strings.Contains(owner.html(), "the host said no") || owner.exists("#connected") {
		t.Error("the page shows text from its URL, or a success notice for a client it does not list")
	}

	// Deleting a provider.
	owner.open("/app/acme/settings/version-control")
	owner.press(row(forge.ID) + " form.delete button")
	owner.waitJS(`!document.querySelector('`+row(forge.ID)+`') && document.querySelector('`+row(gitea)+`')`, "the deleted provider left the page")
	if got := vcsClients(t, e, "acme"); len(got) != 3 || got["forge"] != nil {
		t.Errorf("after deleting forge: %d clients", len(got))
	}
	wantPageEvent(t, e, "oauth-client", "delete", forge.ID, http.StatusNoContent)

	// A provider is deleted under its own organization only, even by
	// whoever reads both (the site admin).
	testenv.NewOrg(t, e.Client, "other")
	admin := newTab(t, e, e.Token)
	if st := admin.open("/app/other/settings/version-control"); st != http.StatusOK {
		t.Fatalf("the site admin opens other's providers: %d", st)
	}
	if st := postFrom(admin, "/app/other/settings/version-control/"+gitea+"/delete", nil); st != http.StatusNotFound {
		t.Errorf("deleting acme's provider under other: %d", st)
	}
	if got := vcsClients(t, e, "acme"); len(got) != 3 {
		t.Errorf("after deleting acme's provider under other: %d clients", len(got))
	}
}

// Who reads the VCS providers but does not manage them (the admin of a
// workspace) sees the list and callback URLs, without the form, a Connect
// link or a delete button, and a post from them is refused; who may not
// read them (a workspace reader, a user of another organization) gets the
// API's status and nothing of the providers. A VCS settings manager who is
// not an owner has the form and the links.
func TestVCSProviderPagesForOthers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "other")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
	if err != nil {
		t.Fatal(err)
	}
	gitea := flowClient(t, e, "acme", map[string]any{"name": "forge-of-acme", "service-provider": "gitea", "http-url": "https://gitea.example.test",
		"api-url": "https://gitea.example.test/api/v1", "key": "gitea-app-client-id", "secret": "gitea-app-secret-7777"})
	team := func(name string, access tfe.AccessType, org *tfe.OrganizationAccessOptions) *tfe.Team {
		t.Helper()
		tm, err := e.Client.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: org})
		if err != nil {
			t.Fatal(err)
		}
		if access != "" {
			if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: tm, Workspace: ws}); err != nil {
				t.Fatal(err)
			}
		}
		return tm
	}
	page := "/app/acme/settings/version-control"
	add := map[string]string{"provider": "github", "name": "sneaked-in", "http_url": "https://github.com", "api_url": "https://api.github.com",
		"token": "sneaked-pat-8888"}
	for _, c := range []struct {
		who, token   string
		read, manage bool
	}{
		{"a workspace admin", userToken(t, e, "acme", "wsadmin@acme.test", team("ws-admins", tfe.AccessAdmin, nil)), true, false},
		{"a VCS settings manager", userToken(t, e, "acme", "vcs@acme.test", team("vcs", "", &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)})), true, true},
		{"a workspace reader", userToken(t, e, "acme", "reader@acme.test", team("readers", tfe.AccessRead, nil)), false, false},
		{"a user of another organization", userToken(t, e, "other", "stranger@other.test"), false, false},
	} {
		tb := newTab(t, e, c.token)
		st := tb.open(page)
		apiStatus, _ := e.API(t, c.token, "GET", "/api/v2/organizations/acme/oauth-clients", nil)
		if c.read != (st == http.StatusOK) || st != apiStatus {
			t.Errorf("%s opens the page: %d; the API answers %d", c.who, st, apiStatus)
		}
		html := tb.html()
		if strings.Contains(html, "forge-of-acme") != c.read {
			t.Errorf("%s: the page names the provider: %v", c.who, !c.read)
		}
		if strings.Contains(html, "gitea-app-secret-7777") {
			t.Errorf("%s: the page shows the application's secret", c.who)
		}
		if c.read {
			if got := shown(tb, `[data-vcs-client="`+gitea+`"] .callback-url`); got != e.URL+"/app/vcs/oauth-clients/"+gitea+"/callback" {
				t.Errorf("%s: the callback URL: %q", c.who, got)
			}
			for _, sel := range []string{"#add-vcs-provider", "a.connect", "form.delete"} {
				if tb.exists(sel) != c.manage {
					t.Errorf("%s: %s on the page: %v", c.who, sel, !c.manage)
				}
			}
			if c.manage {
				if got := linkOf(tb, "a.connect"); got != e.URL+"/app/vcs/oauth-clients/"+gitea+"/connect" {
					t.Errorf("%s: the connect link: %q", c.who, got)
				}
			}
		} else if got := tb.text("#error"); !strings.Contains(got, fmt.Sprint(st)) {
			t.Errorf("%s: the error page: %q", c.who, got)
		}
		tb.screenshot(strings.ReplaceAll(c.who, " ", "-"))
		if c.manage {
			continue
		}
		// A post from them: refused, nothing made or deleted.
		if st := postFrom(tb, page, add); st != http.StatusForbidden && (c.read || st != http.StatusNotFound) {
			t.Errorf("%s adds a provider: %d", c.who, st)
		}
		if st := postFrom(tb, page+"/"+gitea+"/delete", nil); st != http.StatusForbidden && (c.read || st != http.StatusNotFound) {
			t.Errorf("%s deletes the provider: %d", c.who, st)
		}
		if got := vcsClients(t, e, "acme"); len(got) != 1 || got["forge-of-acme"] == nil {
			t.Errorf("after %s's posts: %d clients", c.who, len(got))
		}
	}
}
