package signin_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/testenv"
)

// signedIn is a form client signed in as username.
func signedIn(t *testing.T, e *testenv.Env, username string) *formClient {
	t.Helper()
	f := newFormClient(t, e)
	if st, _ := f.get("/app/signin"); st != http.StatusOK {
		t.Fatalf("the sign-in page: %d", st)
	}
	if st, body := f.post("/app/signin", url.Values{"username": {username}, "password": {goodPassword}}, true); st != http.StatusSeeOther {
		t.Fatalf("signing in as %s: %d %.300s", username, st, body)
	}
	if st, _ := f.get("/app/settings/tokens"); st != http.StatusOK {
		t.Fatalf("the tokens page: %d", st)
	}
	return f
}

// postToken posts the token form and returns the answer (its body read).
func postToken(t *testing.T, f *formClient, description string) (*http.Response, string) {
	t.Helper()
	form := url.Values{"description": {description}, "csrf_token": {f.token}}
	req, _ := http.NewRequest(http.MethodPost, f.e.URL+"/app/settings/tokens", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := f.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if m := tokenRE.FindSubmatch(b); m != nil {
		f.token = string(m[1])
	}
	return resp, string(b)
}

var newTokenRE = regexp.MustCompile(`id="new-token">([^<]+)<`)

// The token form: an empty (or blank) description is refused as such, a
// too long one with the limit, both 422 with what was typed kept and
// nothing made. A token made is shown on the page the post redirects to
// (the secret in no URL), once: that page again shows no secret and
// makes no token. The flash that carries it works for the session that
// made the token only.
func TestTokenFormRefusalsAndRedirect(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	alice := newUser(t, e, "alice")
	f := signedIn(t, e, "alice")
	tokens := func() []*auth.Token {
		t.Helper()
		toks, err := e.Server.Auth.ListTokens(context.Background(), auth.KindUser, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		return toks
	}

	long := strings.Repeat("é", 256)
	for _, c := range []struct{ typed, want, notWant string }{
		{"", "A token needs a description.", "at most"},
		{"   ", "A token needs a description.", "at most"},
		{long, "A token&#39;s description may have at most 255 characters.", "needs a description"},
	} {
		resp, body := postToken(t, f, c.typed)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, c.want) || strings.Contains(body, c.notWant) {
			t.Errorf("a description of %d characters: %d, want 422 saying %q: %.200s", len([]rune(c.typed)), resp.StatusCode, c.want,
				body[strings.Index(body, "<main>"):])
		}
		if !strings.Contains(body, `name="description" value="`+html.EscapeString(c.typed)+`"`) {
			t.Errorf("the refused form does not keep the %d characters typed", len([]rune(c.typed)))
		}
	}
	if n := len(tokens()); n != 0 {
		t.Fatalf("%d tokens after refused forms", n)
	}

	resp, body := postToken(t, f, "laptop")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/app/settings/tokens" {
		t.Fatalf("creating a token: %d to %q, want 303 to the tokens page: %.300s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var flash *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "__Host-terrace-new-token" {
			flash = c
		}
	}
	if flash == nil || !flash.HttpOnly || !flash.Secure || flash.SameSite != http.SameSiteStrictMode || flash.MaxAge <= 0 || flash.MaxAge > 60 {
		t.Fatalf("the flash cookie: %+v, want HttpOnly, Secure, SameSite=Strict, a minute at most", flash)
	}
	// A copy of the flash in another session of alice's shows nothing.
	other := signedIn(t, e, "alice")
	u, _ := url.Parse(e.URL)
	other.c.Jar.SetCookies(u, []*http.Cookie{{Name: flash.Name, Value: flash.Value, Path: "/"}})
	if _, body := other.get("/app/settings/tokens"); strings.Contains(body, `id="new-token"`) {
		t.Error("another session took the flash")
	}

	_, body = f.get("/app/settings/tokens")
	m := newTokenRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the page after creating a token shows no secret: %.500s", body[strings.Index(body, "<main>"):])
	}
	if strings.Contains(flash.Value, m[1]) {
		t.Error("the flash cookie holds the secret in the clear")
	}
	if got := apiStatus(t, e, m[1]); got != http.StatusOK {
		t.Fatalf("the new token on the API: %d", got)
	}
	// Once: again, the page shows no secret, and nothing more is made.
	if _, body := f.get("/app/settings/tokens"); strings.Contains(body, `id="new-token"`) || strings.Contains(body, m[1]) {
		t.Error("the tokens page shows the secret a second time")
	}
	if toks := tokens(); len(toks) != 1 || toks[0].Description != "laptop" {
		t.Errorf("alice's tokens: %+v, want laptop only", toks)
	}
}

// In a real browser, reloading the page that shows a new token neither
// shows its secret again nor makes another token.
func TestBrowserTokenReloadMakesNoToken(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	alice := newUser(t, e, "alice")
	b := newBrowser(t, e)
	b.run("opening the tokens page", chromedp.Navigate(e.URL+"/app/settings/tokens"))
	b.signIn("alice", goodPassword)
	b.run("creating a token", chromedp.WaitVisible(chromedp.ID("create-token")),
		chromedp.SetValue(chromedp.ID("description"), "laptop"),
		chromedp.Click(chromedp.ID("create-token")),
		chromedp.WaitVisible(chromedp.ID("new-token")))
	secret := b.text("#new-token")
	if loc := b.location(); loc != e.URL+"/app/settings/tokens" {
		t.Errorf("the new token is shown at %s", loc)
	}
	b.run("reloading", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("tokens")))
	if page := get(b, "reading the page", chromedp.OuterHTML(chromedp.CSS("html"))); strings.Contains(page, secret) {
		t.Error("the reloaded page shows the secret again")
	}
	toks, err := e.Server.Auth.ListTokens(context.Background(), auth.KindUser, alice.ID)
	if err != nil || len(toks) != 1 {
		t.Fatalf("alice's tokens after a reload: %d %v, want 1", len(toks), err)
	}
}

// The site token (restored at every start from <data-dir>/site-token,
// internal/server's siteToken) is listed with a note that revoking it
// lasts until the next start and how to retire it; the admin's other
// tokens, even one described "site token", have none.
func TestSiteTokenIsMarked(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	admin, err := e.Server.Auth.UserByName(ctx, "admin")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Server.Signin.SetPassword(ctx, admin.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	f := signedIn(t, e, "admin")
	if resp, _ := postToken(t, f, "site token"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("making a token described as the site token: %d", resp.StatusCode)
	}
	_, body := f.get("/app/settings/tokens")
	toks, err := e.Server.Auth.ListTokens(ctx, auth.KindUser, admin.ID)
	if err != nil || len(toks) != 2 {
		t.Fatalf("the admin's tokens: %d %v", len(toks), err)
	}
	row := func(id string) string {
		i := strings.Index(body, `data-id="`+id+`"`)
		if i < 0 {
			t.Fatalf("no row of %s", id)
		}
		rest := body[i:]
		return rest[:strings.Index(rest, "</tr>")]
	}
	site, mine := row(toks[0].ID), row(toks[1].ID)
	if toks[0].CreatedBy != "" {
		site, mine = mine, site
	}
	if !strings.Contains(site, "site-token-note") || !strings.Contains(site, "&lt;data-dir&gt;/site-token") ||
		!strings.Contains(site, "lasts only until the next start") {
		t.Errorf("the site token's row: %s", site)
	}
	if strings.Contains(mine, "site-token-note") {
		t.Errorf("a token the admin made is marked as the site token: %s", mine)
	}
}

// A token revoked between its creation and the page its flash leads to
// is not shown: the flash names the token, and the page shows its secret
// only beside a token of the user's that still exists.
func TestFlashOfARevokedTokenShowsNoSecret(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	alice := newUser(t, e, "alice")
	f := signedIn(t, e, "alice")
	if resp, body := postToken(t, f, "laptop"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("creating a token: %d %.300s", resp.StatusCode, body)
	}
	toks, err := e.Server.Auth.ListTokens(ctx, auth.KindUser, alice.ID)
	if err != nil || len(toks) != 1 {
		t.Fatalf("alice's tokens: %+v, %v", toks, err)
	}
	if err := e.Server.Auth.DeleteToken(ctx, e.Server.DB, toks[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, body := f.get("/app/settings/tokens"); strings.Contains(body, `id="new-token"`) {
		t.Errorf("the page shows the secret of a revoked token: %.500s", body[strings.Index(body, "<main>"):])
	}
}
