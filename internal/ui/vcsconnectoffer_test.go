package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// ownerTab is a tab of a member of the organization's owners team.
func ownerTab(t *testing.T, e *testenv.Env, org, email string) *tab {
	t.Helper()
	owners, err := e.Client.Teams.List(context.Background(), org, &tfe.TeamListOptions{Names: []string{"owners"}})
	if err != nil || len(owners.Items) != 1 {
		t.Fatalf("the owners team: %v %v", owners, err)
	}
	return newTab(t, e, userToken(t, e, org, email, owners.Items[0]))
}

// postPage posts the page's CSRF token (and nothing else) to path from the
// page the tab is on and returns the status and the answer's text.
func postPage(tb *tab, path string) (int, string) {
	tb.t.Helper()
	js := fmt.Sprintf(`fetch(%q, {method: 'POST', headers: {'Content-Type': 'application/x-www-form-urlencoded'}, redirect: 'manual',
		body: 'csrf_token=' + encodeURIComponent(document.querySelector('meta[name=csrf-token]').content)}).then(function(r){ return r.text().then(function(t){ return r.status + " " + t }) })`, path)
	got := must(tb, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
	status, body, _ := strings.Cut(got, " ")
	var st int
	fmt.Sscan(status, &st)
	return st, body
}

// Connect (or Reconnect) is offered only for a provider that has an OAuth
// application (a key) and whose flow Terrace runs: a Gitea provider
// connected with a personal access token only has no Connect link, and
// its connect page, opened anyway, says what is missing and links back
// to the VCS providers page instead of offering a form that ends on a
// 422 error page; so does a post to it, and the page of a provider whose
// flow Terrace does not run (GitLab).
func TestVCSConnectOfferedOnlyWithAnApplication(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	provider := func(p string) *tfe.ServiceProviderType { v := tfe.ServiceProviderType(p); return &v }
	pat, err := e.Client.OAuthClients.Create(ctx, "acme", tfe.OAuthClientCreateOptions{Name: tfe.String("gitea-pat"), ServiceProvider: provider("gitea"),
		HTTPURL: tfe.String("https://gitea.example.test"), APIURL: tfe.String("https://gitea.example.test/api/v1"), OAuthToken: tfe.String("gitea-pat-secret-1111")})
	if err != nil {
		t.Fatal(err)
	}
	gitlab, err := e.Client.OAuthClients.Create(ctx, "acme", tfe.OAuthClientCreateOptions{Name: tfe.String("gitlab-ops"), ServiceProvider: provider("gitlab_hosted"),
		HTTPURL: tfe.String("https://gitlab.com"), APIURL: tfe.String("https://gitlab.com/api/v4"), OAuthToken: tfe.String("glpat-secret-2222")})
	if err != nil {
		t.Fatal(err)
	}
	// An application and a token: Reconnect.
	app := flowClient(t, e, "acme", map[string]any{"name": "gitea-app", "service-provider": "gitea", "http-url": "https://gitea.example.test",
		"api-url": "https://gitea.example.test/api/v1", "key": "gitea-app-client-id", "secret": "gitea-app-secret-3333",
		"oauth-token-string": "gitea-app-pat-4444"})

	// A client ID without its secret: the flow cannot run, no Connect.
	keyOnly := flowClient(t, e, "acme", map[string]any{"name": "gitea-key-only", "service-provider": "gitea", "http-url": "https://gitea.example.test",
		"api-url": "https://gitea.example.test/api/v1", "key": "gitea-key-only-client-id"})

	owner := ownerTab(t, e, "acme", "owner@acme.test")
	page := "/app/acme/settings/version-control"
	if st := owner.open(page); st != http.StatusOK {
		t.Fatalf("the providers page: %d", st)
	}
	row := func(id string) string { return `[data-vcs-client="` + id + `"]` }
	connect := func(id string) string { return e.URL + "/app/vcs/oauth-clients/" + id + "/connect" }
	for id, want := range map[string]string{pat.ID: "", gitlab.ID: "", keyOnly: "", app: connect(app)} {
		if got := linkOf(owner, row(id)+" a.connect"); got != want {
			t.Errorf("%s's connect link: %q, want %q", id, got, want)
		}
	}
	if got := shown(owner, row(app)+" a.connect"); got != "Reconnect" {
		t.Errorf("the connected provider with an application offers %q, want Reconnect", got)
	}
	// The provider without an application still shows its callback URL
	// and the form that gives it one, and says it needs one to connect.
	if got := shown(owner, row(pat.ID)+" .callback-url"); got != e.URL+"/app/vcs/oauth-clients/"+pat.ID+"/callback" {
		t.Errorf("the PAT provider's callback URL: %q", got)
	}
	if !owner.exists(row(pat.ID) + " form.application") {
		t.Error("the PAT provider has no form to give it an OAuth application")
	}
	if got := shown(owner, row(pat.ID)+" .connect-hint"); !strings.Contains(got, "set its OAuth application first") {
		t.Errorf("the PAT provider's hint: %q", got)
	}
	owner.screenshot("vcs-connect-offer")

	// Its connect page, opened anyway: what is missing, and the way back.
	for _, c := range []struct {
		id, want string
	}{
		{pat.ID, "no OAuth application to connect through"},
		{gitlab.ID, "Terrace does not run the OAuth authorization flow of GitLab.com"},
		{keyOnly, "OAuth application has no secret"},
	} {
		if st := owner.open("/app/vcs/oauth-clients/" + c.id + "/connect"); st != http.StatusOK {
			t.Errorf("%s's connect page: %d", c.id, st)
		}
		if got := shown(owner, "#connect-missing"); !strings.Contains(got, c.want) {
			t.Errorf("%s's connect page says %q, want %q", c.id, got, c.want)
		}
		if owner.exists("#connect-form") {
			t.Errorf("%s's connect page offers to continue", c.id)
		}
		if got := linkOf(owner, "#connect-back"); got != e.URL+page {
			t.Errorf("%s's connect page links back to %q", c.id, got)
		}
	}
	owner.open("/app/vcs/oauth-clients/" + pat.ID + "/connect")
	owner.screenshot("vcs-connect-missing")
	// Posted anyway: the service's refusal on the same page, with the way
	// back, not the error page.
	st, body := postPage(owner, "/app/vcs/oauth-clients/"+pat.ID+"/connect")
	if st != http.StatusUnprocessableEntity || !strings.Contains(body, `id="connect-missing"`) || !strings.Contains(body, `href="`+page+`"`) {
		t.Errorf("posting the PAT provider's connect form: %d %.2000s", st, body)
	}
	// The provider with an application: the form to continue.
	owner.open("/app/vcs/oauth-clients/" + app + "/connect")
	if !owner.exists("#connect-form") || owner.exists("#connect-missing") {
		t.Error("the provider with an application is not offered the connection")
	}
	if got := shown(owner, "#connect-title"); got != "Reconnect gitea-app" {
		t.Errorf("its title: %q", got)
	}
}
