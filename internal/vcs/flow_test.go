package vcs_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestConnectFlow: the OAuth authorization flow up to the host's answer,
// with a host that does not exist (the whole flow against a real Gitea is
// internal/ui TestVCSProviderConnectsThroughGitea). A client made without
// a token shows its callback URL and connect path; starting needs the
// application's key and secret, a person, and the right to manage VCS
// providers; the authorization URL carries a PKCE challenge and never the
// secret; a state is good once, for the person who started it, for this
// client, within its lifetime; a declined authorization changes nothing.
func TestConnectFlow(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		c := e.Client
		org := testenv.NewOrg(t, c, "acme").Name
		principal := func(token string) context.Context {
			t.Helper()
			p, err := e.Server.Auth.Authenticate(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			return authz.WithModel(auth.WithPrincipal(ctx, p), e.Server.Authz)
		}
		user := func(name string, access *tfe.OrganizationAccessOptions) context.Context {
			t.Helper()
			var teams []*tfe.Team
			if access != nil {
				tm, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String(name), OrganizationAccess: access})
				if err != nil {
					t.Fatal(err)
				}
				teams = append(teams, tm)
			}
			_, m := e.UserClient(t, org, name+"@acme.test", teams...)
			_, secret, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
			if err != nil {
				t.Fatal(err)
			}
			return principal(secret)
		}
		manager := user("vcs", &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)})
		other := user("vcs2", &tfe.OrganizationAccessOptions{ManageVCSSettings: tfe.Bool(true)})
		member := user("member", nil)
		ws, err := c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		admins, err := c.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("ws-admins")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessAdmin), Team: admins, Workspace: ws}); err != nil {
			t.Fatal(err)
		}
		_, m := e.UserClient(t, org, "wsadmin@acme.test", admins)
		_, wsAdminToken, err := e.Server.Auth.CreateToken(ctx, e.Server.DB, auth.NewToken{Kind: auth.KindUser, Subject: m.User.ID})
		if err != nil {
			t.Fatal(err)
		}
		wsAdmin := principal(wsAdminToken)
		orgToken, err := c.OrganizationTokens.Create(ctx, org)
		if err != nil {
			t.Fatal(err)
		}
		asOrg := principal(orgToken.Token)
		svc := e.Server.VCS
		states := func() int {
			t.Helper()
			var n int
			if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM vcs_oauth_states`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		// Made without a token: connected later, through the flow.
		// Its host is a closed port of this machine: nothing answers, and
		// no name is looked up.
		body := createBody("gitea", "", map[string]any{"api-url": "https://127.0.0.1:1/api/v1", "http-url": "https://127.0.0.1:1"})
		delete(body["data"].(map[string]any)["attributes"].(map[string]any), "oauth-token-string")
		status, b := e.API(t, "", "POST", "/api/v2/organizations/"+org+"/oauth-clients", body)
		if status != http.StatusCreated {
			t.Fatalf("creating a Gitea client without a token: %d %s", status, b)
		}
		id := decode(t, b).Data.ID
		oc, err := c.OAuthClients.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		callback := "https://" + e.Server.Hostname + "/app/vcs/oauth-clients/" + id + "/callback"
		if oc.CallbackURL != callback || oc.ConnectPath != "/app/vcs/oauth-clients/"+id+"/connect" || len(oc.OAuthTokens) != 0 {
			t.Fatalf("go-tfe reads callback-url %q, connect-path %q, tokens %v; want %q, the connect path and none",
				oc.CallbackURL, oc.ConnectPath, oc.OAuthTokens, callback)
		}

		// No application yet: starting says what to register.
		if _, err := svc.StartConnect(manager, id); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), callback) {
			t.Fatalf("starting without key and secret: %v, want a 422 naming the callback URL", err)
		}
		if _, err := c.OAuthClients.Update(ctx, id, tfe.OAuthClientUpdateOptions{Key: tfe.String("app-client-id"), Secret: tfe.String(clientSec)}); err != nil {
			t.Fatal(err)
		}

		// Who may not start.
		for _, tc := range []struct {
			who  string
			ctx  context.Context
			kind core.Kind
		}{
			{"the organization's token", asOrg, core.KindForbidden},
			{"a member who may not read VCS providers", member, core.KindForbidden},
			{"a workspace admin, who reads but does not manage them", wsAdmin, core.KindForbidden},
		} {
			if _, err := svc.StartConnect(tc.ctx, id); core.KindOf(err) != tc.kind {
				t.Errorf("%s starting: %v, want %v", tc.who, err, tc.kind)
			}
		}
		if n := states(); n != 0 {
			t.Errorf("%d connections kept after refused starts", n)
		}

		start := func(who context.Context) string {
			t.Helper()
			to, err := svc.StartConnect(who, id)
			if err != nil {
				t.Fatal(err)
			}
			u, err := url.Parse(to)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			if u.Host != "127.0.0.1:1" || u.Path != "/login/oauth/authorize" || q.Get("client_id") != "app-client-id" ||
				q.Get("redirect_uri") != callback || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" ||
				q.Get("code_challenge") == "" || q.Get("state") == "" {
				t.Fatalf("authorization URL %s", to)
			}
			if strings.Contains(to, clientSec) {
				t.Fatalf("the authorization URL carries the client's secret: %s", to)
			}
			return q.Get("state")
		}
		state := start(manager)
		var verifier, hash string
		if err := e.Server.DB.QueryRow(ctx, `SELECT state_hash, code_verifier FROM vcs_oauth_states`).Scan(&hash, &verifier); err != nil {
			t.Fatal(err)
		}
		if hash == state || !e.Server.Keys.IsSealed("vcs_oauth_states.code_verifier", verifier) {
			t.Errorf("the state is kept as %q and its verifier as %q: want the state's hash and the verifier sealed", hash, verifier)
		}

		// Another manager cannot finish it, and it is spent.
		if _, err := svc.FinishConnect(other, id, state, "code"); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "start it again") {
			t.Errorf("another person finishing: %v, want the unknown connection's 422", err)
		}
		if _, err := svc.FinishConnect(manager, id, state, "code"); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "start it again") {
			t.Errorf("finishing a state someone else spent: %v, want the unknown connection's 422", err)
		}

		// Another client's callback, an expired state, a made-up one.
		second := unreachable(t, c, org, "gitea", true)
		tok, err := c.OAuthTokens.Read(ctx, second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := svc.FinishConnect(manager, tok.OAuthClient.ID, start(manager), "code"); core.KindOf(err) != core.KindInvalid {
			t.Errorf("a state at another client's callback: %v, want 422", err)
		}
		state = start(manager)
		if _, err := e.Server.DB.Exec(ctx, `UPDATE vcs_oauth_states SET expires_at = ?`, core.Micros(core.Now().Add(-1))); err != nil {
			t.Fatal(err)
		}
		if _, err := svc.FinishConnect(manager, id, state, "code"); core.KindOf(err) != core.KindInvalid {
			t.Errorf("an expired state: %v, want 422", err)
		}
		if _, err := svc.FinishConnect(manager, id, "made-up", "code"); core.KindOf(err) != core.KindInvalid {
			t.Errorf("a made-up state: %v, want 422", err)
		}

		// Declined at the host: said, spent, nothing changed.
		state = start(manager)
		err = svc.DeclinedConnect(manager, id, state, "access_denied", "The resource owner denied the request")
		if core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "access_denied The resource owner denied") {
			t.Errorf("declined: %v, want a 422 with the host's error", err)
		}
		if _, err := svc.FinishConnect(manager, id, state, "code"); core.KindOf(err) != core.KindInvalid {
			t.Errorf("finishing a declined connection: %v, want 422", err)
		}

		// A host that does not answer gives no token: nothing is kept.
		state = start(manager)
		if _, err := svc.FinishConnect(manager, id, state, "code"); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "did not give a token") {
			t.Errorf("finishing with an unreachable host: %v, want the host's refusal", err)
		} else if strings.Contains(err.Error(), clientSec) {
			t.Errorf("the refusal shows the client's secret: %v", err)
		}
		if oc, err := c.OAuthClients.Read(ctx, id); err != nil || len(oc.OAuthTokens) != 0 {
			t.Errorf("the client after failed connections: %v, %v; want no token", oc, err)
		}
		if n := states(); n != 0 {
			t.Errorf("%d connections left after each was finished or refused", n)
		}

		// A token string given through the API replaces a flow token
		// whole: no expiry or refresh token of the old one stays to
		// "renew" it with.
		oc, err = c.OAuthClients.Update(ctx, id, tfe.OAuthClientUpdateOptions{OAuthToken: tfe.String(tokenString)})
		if err != nil || len(oc.OAuthTokens) != 1 {
			t.Fatalf("giving the client a token string: %v, %v", oc, err)
		}
		if _, err := e.Server.DB.Exec(ctx, `UPDATE oauth_tokens SET refresh_token = 'r', expires_at = ? WHERE id = ?`,
			core.Micros(core.Now()), oc.OAuthTokens[0].ID); err != nil {
			t.Fatal(err)
		}
		if _, err := c.OAuthClients.Update(ctx, id, tfe.OAuthClientUpdateOptions{OAuthToken: tfe.String(tokenString + "-2")}); err != nil {
			t.Fatal(err)
		}
		var refresh *string
		var expires *int64
		if err := e.Server.DB.QueryRow(ctx, `SELECT refresh_token, expires_at FROM oauth_tokens WHERE id = ?`, oc.OAuthTokens[0].ID).Scan(&refresh, &expires); err != nil {
			t.Fatal(err)
		}
		if refresh != nil || expires != nil {
			t.Errorf("after a token string replaced a flow token: refresh %v, expiry %v; want neither", refresh, expires)
		}
		cred, err := svc.Credential(ctx, e.Server.DB, oc.OAuthTokens[0].ID)
		if err != nil || cred.Token != tokenString+"-2" {
			t.Errorf("the credential after a token string: %v, %v", cred, err)
		}

		// A provider whose flow Terrace does not run.
		gl, err := c.OAuthClients.Create(ctx, org, tfe.OAuthClientCreateOptions{APIURL: tfe.String("https://gitlab.invalid/api/v4"),
			HTTPURL: tfe.String("https://gitlab.invalid"), OAuthToken: tfe.String(tokenString), ServiceProvider: tfe.ServiceProvider(tfe.ServiceProviderGitlab),
			Key: tfe.String("k"), Secret: tfe.String(clientSec)})
		if err != nil {
			t.Fatal(err)
		}
		if gl.CallbackURL != "" || gl.ConnectPath != "" {
			t.Errorf("a GitLab client shows callback %q and connect path %q, want neither", gl.CallbackURL, gl.ConnectPath)
		}
		if _, err := svc.StartConnect(manager, gl.ID); core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "does not run the OAuth authorization flow of GitLab") {
			t.Errorf("starting GitLab's flow: %v, want a 422 saying Terrace does not run it", err)
		}
	})
}
