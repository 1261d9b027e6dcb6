package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestVCSProviderConnectsThroughGitea: the whole OAuth authorization flow
// against a real Gitea, in a real browser. A VCS manager makes a Gitea
// provider without a token, registers its callback URL as a Gitea OAuth
// application, gives the provider the application's key and secret,
// opens the connect path, signs in to Gitea, authorizes, and lands on
// the organization's VCS providers page. The token Terrace redeemed is
// the Gitea user's (a workspace connects to a repository only they can
// read, and its webhook is registered); replaying the callback is
// refused; a token near its expiry is renewed with its refresh token, and
// the renewed one works.
func TestVCSProviderConnectsThroughGitea(t *testing.T) {
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	ctx := context.Background()
	org := testenv.NewOrg(t, e.Client, "acme").Name

	// Gitea: a person with a password, a private repository only they
	// (and the admin) may read, and the OAuth application made below.
	const alice, password = "alice", "correct-horse-battery-staple-9"
	g.Must(t, "POST", "/admin/users", map[string]any{"username": alice, "email": "alice@example.test", "password": password,
		"must_change_password": false})
	repo := g.CreateRepo(t, "infra")
	g.Push(t, repo, "main", map[string]string{"main.tf": `resource "terraform_data" "x" {}`}, "first")
	if status, out := g.Call(t, "PUT", "/repos/"+repo+"/collaborators/"+alice, map[string]any{"permission": "admin"}); status != http.StatusNoContent {
		t.Fatalf("adding %s to %s: %d %v", alice, repo, status, out)
	}

	// Terrace: the provider, made by a VCS manager without a token.
	vcsTeam, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("vcs"),
		OrganizationAccess: &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true), ManageWorkspaces: tfe.Bool(true)}})
	if err != nil {
		t.Fatal(err)
	}
	manager := userToken(t, e, org, "manager@acme.test", vcsTeam)
	status, b := e.API(t, manager, "POST", "/api/v2/organizations/"+org+"/oauth-clients", map[string]any{"data": map[string]any{
		"type": "oauth-clients", "attributes": map[string]any{"service-provider": "gitea", "name": "corp gitea",
			"api-url": g.URL + "/api/v1", "http-url": g.URL}}})
	if status != http.StatusCreated {
		t.Fatalf("creating the provider: %d %s", status, b)
	}
	var id string
	for _, f := range strings.Split(string(b), `"`) {
		if strings.HasPrefix(f, "oc-") {
			id = f
			break
		}
	}
	mc := e.NewClient(t, manager)
	oc, err := mc.OAuthClients.Read(ctx, id)
	if err != nil || oc.CallbackURL == "" {
		t.Fatalf("reading the provider %q: %v, %v", id, oc, err)
	}
	app := g.Must(t, "POST", "/user/applications/oauth2", map[string]any{"name": "Terrace", "redirect_uris": []string{oc.CallbackURL},
		"confidential_client": true})
	clientID, _ := app["client_id"].(string)
	secret, _ := app["client_secret"].(string)
	if clientID == "" || secret == "" {
		t.Fatalf("gitea's OAuth application: %v", app)
	}

	// The browser: the application's client ID and secret given on the
	// providers page, then connect, sign in to Gitea, authorize.
	tb := newTab(t, e, manager)
	card := `[data-vcs-client="` + id + `"]`
	if status := tb.open("/app/" + org + "/settings/version-control"); status != http.StatusOK {
		t.Fatalf("the providers page: %d", status)
	}
	if got := tb.text(card + " .callback-url"); got != oc.CallbackURL {
		t.Errorf("the page shows callback URL %q, want %q", got, oc.CallbackURL)
	}
	// A client ID without its secret is refused, and changes nothing.
	tb.waitJS(`(function(){var f=document.querySelector('`+card+` form.application'); if (!f) return false;
		f.querySelector('[name=key]').value="`+clientID+`"; return true})()`, "showed the OAuth application form")
	tb.press(card + " form.application button")
	if got := tb.waitText("#form-error", "needs its client ID and its secret", time.Minute); got == "" {
		t.Error("no refusal shown")
	}
	if oc, err := mc.OAuthClients.Read(ctx, id); err != nil || oc.Key != "" {
		t.Fatalf("the provider's key after a refused form: %v, %v; want none", oc, err)
	}
	tb.waitJS(`(function(){var f=document.querySelector('`+card+` form.application'); if (!f) return false;
		f.querySelector('[name=key]').value="`+clientID+`"; f.querySelector('[name=secret]').value="`+secret+`"; return true})()`,
		"showed the OAuth application form")
	tb.press(card + " form.application button")
	// The page after the post: its secret field is empty again (the page
	// before it, still showing what was typed, must not satisfy the wait).
	tb.waitJS(`document.readyState === "complete" && (function(){var f=document.querySelector('`+card+` form.application');
		return !!f && f.querySelector('[name=key]').value === "`+clientID+`" && f.querySelector('[name=secret]').value === ""})()`,
		"showed the application's client ID after setting it")
	if strings.Contains(tb.html(), secret) {
		t.Error("the page shows the application's secret")
	}
	if oc, err := mc.OAuthClients.Read(ctx, id); err != nil || oc.Key != clientID {
		t.Fatalf("the provider's key after the form: %v, %v; want %s", oc, err, clientID)
	}
	tb.press(card + " a.connect")
	tb.waitLocation(oc.ConnectPath)
	// This Gitea is built without its frontend assets: its pages alert
	// that they are missing, and an alert blocks the page until accepted.
	if err := chromedp.Listen(tb.ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go chromedp.Call(tb.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}); err != nil {
		t.Fatal(err)
	}
	if got := tb.text("#connect-host"); got != g.URL {
		t.Errorf("the connect page names host %q, want %q", got, g.URL)
	}
	tb.press("#connect-form button")
	tb.waitLocation(g.URL + "/user/login")
	// Gitea's sign-in form, filled in the page (as the other steps, an
	// evaluation that meets a page still loading is tried again).
	tb.waitJS(`(function(){var u=document.querySelector("#user_name"), p=document.querySelector("#password");
		if (!u || !p) return false; u.value="`+alice+`"; p.value="`+password+`"; return true})()`, "showed Gitea's sign-in form")
	tb.press(`form[action$="/user/login"] button.primary`)
	tb.waitLocation(g.URL + "/login/oauth/authorize")
	tb.press(`form[action$="/login/oauth/grant"] button[name="granted"][value="true"]`)
	tb.waitLocation(e.URL + "/app/" + org + "/settings/version-control?connected=" + id)

	// Recorded as the API's update of the client, from the pages: the
	// application set, then the connection.
	connected := 0
	for _, ev := range uiEvents(e.AuditTrail(t)) {
		if ev.Resource.Meta["route"] == "PATCH /api/v2/oauth-clients/{id}" && ev.Resource.ID == id && ev.Resource.Meta["status"] == "200" {
			connected++
		}
	}
	if connected != 2 {
		t.Errorf("%d audit events of the client's updates from the pages, want 2", connected)
	}

	// The token is alice's, and reads what she reads.
	oc, err = mc.OAuthClients.Read(ctx, id)
	if err != nil || len(oc.OAuthTokens) != 1 {
		t.Fatalf("the provider after connecting: %v, %v; want one token", oc, err)
	}
	tokenID := oc.OAuthTokens[0].ID
	tok, err := mc.OAuthTokens.Read(ctx, tokenID)
	if err != nil || tok.ServiceProviderUser != alice {
		t.Fatalf("the token: %v, %v; want %s's", tok, err, alice)
	}
	ws, err := mc.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("infra"),
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(tokenID)}})
	if err != nil {
		t.Fatalf("connecting a workspace with the redeemed token: %v", err)
	}
	if ws.VCSRepo == nil || ws.VCSRepo.Branch != "main" {
		t.Errorf("the workspace's repository: %+v", ws.VCSRepo)
	}
	// The webhook is registered after the connection is kept (outbox),
	// with the redeemed token.
	waitHooks(t, g, repo, ws.VCSRepo.WebhookURL)

	// A callback with a state this person did not start is refused, and
	// the token stays as it was.
	var sealed string
	if err := e.Server.DB.QueryRow(ctx, `SELECT token FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if !e.Server.Keys.IsSealed("oauth_tokens.token", sealed) {
		t.Errorf("the redeemed token is kept as %q, want it sealed", sealed)
	}
	if status := tb.open("/app/vcs/oauth-clients/" + id + "/callback?code=x&state=" + url.QueryEscape("replayed")); status != http.StatusUnprocessableEntity {
		t.Errorf("a callback with a made-up state: %d, want 422", status)
	}
	if !strings.Contains(tb.text(".detail"), "start it again") {
		t.Errorf("the refused callback says %q", tb.text(".detail"))
	}
	var now string
	var refresh *string
	if err := e.Server.DB.QueryRow(ctx, `SELECT token, refresh_token FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&now, &refresh); err != nil {
		t.Fatal(err)
	}
	if now != sealed {
		t.Error("the token changed after a refused callback")
	}
	if refresh == nil || !e.Server.Keys.IsSealed("oauth_tokens.refresh_token", *refresh) {
		t.Errorf("the refresh token is kept as %v, want Gitea's, sealed", refresh)
	}

	// Renewal: a token about to expire is renewed with its refresh token
	// when it is next used; the renewed one is alice's.
	var expires *int64
	if err := e.Server.DB.QueryRow(ctx, `SELECT expires_at FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&expires); err != nil || expires == nil {
		t.Fatalf("the token's expiry: %v, %v; Gitea's tokens expire", expires, err)
	}
	if _, err := e.Server.DB.Exec(ctx, `UPDATE oauth_tokens SET expires_at = ? WHERE id = ?`, core.Micros(core.Now().Add(30*time.Second)), tokenID); err != nil {
		t.Fatal(err)
	}
	after, err := e.Server.VCS.Credential(ctx, e.Server.DB, tokenID)
	if err != nil {
		t.Fatalf("renewing: %v", err)
	}
	var renewed int64
	if err := e.Server.DB.QueryRow(ctx, `SELECT expires_at FROM oauth_tokens WHERE id = ?`, tokenID).Scan(&renewed); err != nil {
		t.Fatal(err)
	}
	// (Gitea's new token may be the same string when it is issued within
	// the second of the old one: the expiry Gitea gave is the proof.)
	if !core.FromMicros(renewed).After(core.Now().Add(10 * time.Minute)) {
		t.Errorf("the token expires at %v after its renewal, want Gitea's new expiry (an hour)", core.FromMicros(renewed))
	}
	req, _ := http.NewRequest("GET", g.URL+"/api/v1/user", nil)
	req.Header.Set("Authorization", "token "+after.Token)
	res, err := g.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var who struct {
		Login string `json:"login"`
	}
	if err := json.NewDecoder(res.Body).Decode(&who); err != nil || res.StatusCode != http.StatusOK || who.Login != alice {
		t.Errorf("gitea answers the renewed token with %d, %q (%v), want %s", res.StatusCode, who.Login, err, alice)
	}

	// Deleting the provider removes its webhooks from Gitea, even when
	// its token has expired meanwhile (nobody used it for an hour): the
	// removal renews it with the refresh token it sealed, once for every
	// webhook of the token (Gitea, as GitHub, takes a refresh token once).
	ws2, err := mc.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("infra-2"),
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(tokenID)}})
	if err != nil {
		t.Fatalf("connecting a second workspace: %v", err)
	}
	waitHooks(t, g, repo, ws.VCSRepo.WebhookURL, ws2.VCSRepo.WebhookURL)
	gone, err := e.Server.Keys.SealString("oauth_tokens.token", "an-access-token-gitea-does-not-know")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Server.DB.Exec(ctx, `UPDATE oauth_tokens SET token = ?, expires_at = ? WHERE id = ?`, gone, core.Micros(core.Now().Add(-time.Minute)), tokenID); err != nil {
		t.Fatal(err)
	}
	if err := mc.OAuthClients.Delete(ctx, id); err != nil {
		t.Fatalf("deleting the provider: %v", err)
	}
	waitHooks(t, g, repo)
}

// waitHooks waits (30 s at most) until the URLs of the webhooks Gitea has
// for repo are want, in order.
func waitHooks(t *testing.T, g *testenv.Gitea, repo string, want ...string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var hooks []struct {
			Config map[string]string `json:"config"`
		}
		status := g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		var urls []string
		for _, h := range hooks {
			urls = append(urls, h.Config["url"])
		}
		if status == http.StatusOK && strings.Join(urls, " ") == strings.Join(want, " ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the repository's webhooks: %d %q, want %q", status, urls, want)
		}
	}
}
