package signin_test

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/mailsink"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

const goodPassword = "correct horse battery staple"

// newUser creates a user with a password.
func newUser(t *testing.T, e *testenv.Env, name string) *auth.User {
	t.Helper()
	ctx := context.Background()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, name, name+"@example.test", false)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Server.Signin.SetPassword(ctx, u.ID, goodPassword); err != nil {
		t.Fatal(err)
	}
	return u
}

// apiStatus is the status of GET /api/v2/account/details with token.
func apiStatus(t *testing.T, e *testenv.Env, token string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/v2/account/details", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestBrowserPasswordSignIn signs in with a password in a real browser: a
// wrong password is refused, the session cookie is Secure, HttpOnly and
// SameSite=Lax, the settings page creates a token that the API accepts
// and revokes it (the API then refuses it), sign-out ends the session, and
// repeated attempts on one account are refused even with the right
// password.
func TestBrowserPasswordSignIn(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	newUser(t, e, "alice")
	newUser(t, e, "mallory")
	b := newBrowser(t, e)

	// A page that needs a user sends the browser to sign in, then back.
	b.run("opening the tokens page", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("username")))
	if loc := b.location(); !strings.Contains(loc, "/app/signin?next=%2Fapp%2Fsettings%2Ftokens") {
		t.Fatalf("the tokens page sent the browser to %s, want the sign-in page with next", loc)
	}
	b.signIn("alice", "not the password")
	b.run("waiting for the refusal", chromedp.WaitVisible(chromedp.ID("error")))
	if msg := b.text("#error"); !strings.Contains(msg, "Wrong username or password") {
		t.Fatalf("a wrong password shows %q", msg)
	}
	if c := b.cookies(e.URL); len(c) != 0 {
		t.Fatalf("a refused sign-in set cookies: %+v", c)
	}
	b.screenshot("refused")

	b.signIn("alice", goodPassword)
	b.run("waiting for the tokens page", chromedp.WaitVisible(chromedp.ID("create-token")))
	var session *networkCookie
	for _, c := range b.cookies(e.URL) {
		if c.Name == signin.CookieName {
			session = &networkCookie{c.HTTPOnly, c.Secure, string(c.SameSite), c.Value}
		}
	}
	if session == nil || !session.httpOnly || !session.secure || session.sameSite != "Lax" {
		t.Fatalf("session cookie after sign-in: %+v, want HttpOnly, Secure, SameSite=Lax", session)
	}
	// The session is not an API credential.
	if got := apiStatus(t, e, session.value); got != http.StatusUnauthorized {
		t.Fatalf("the session id as an API token: %d, want 401", got)
	}

	b.run("creating a token",
		chromedp.SetValue(chromedp.ID("description"), "laptop"),
		chromedp.Click(chromedp.ID("create-token")),
		chromedp.WaitVisible(chromedp.ID("new-token")))
	secret := b.text("#new-token")
	b.screenshot("token-created")
	if got := apiStatus(t, e, secret); got != http.StatusOK {
		t.Fatalf("the new token on the API: %d, want 200", got)
	}
	toks, err := e.Server.Auth.ListTokens(context.Background(), auth.KindUser, mustUser(t, e, "alice").ID)
	if err != nil || len(toks) != 1 || toks[0].Description != "laptop" {
		t.Fatalf("alice's tokens after creating one: %v %v", toks, err)
	}
	// Shown once: the page reloaded shows no secret.
	b.run("reloading", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("tokens")))
	html := get(b, "reading the page", chromedp.OuterHTML(chromedp.CSS("html")))
	if strings.Contains(html, secret) {
		t.Fatal("the tokens page shows the secret again")
	}
	b.run("revoking the token", chromedp.Click(chromedp.ID("revoke-"+toks[0].ID)), chromedp.WaitVisible(chromedp.ID("no-tokens")))
	if got := apiStatus(t, e, secret); got != http.StatusUnauthorized {
		t.Fatalf("the revoked token on the API: %d, want 401", got)
	}

	// A form posted from another site is refused.
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/app/settings/tokens", strings.NewReader("description=x"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	req.AddCookie(&http.Cookie{Name: signin.CookieName, Value: session.value})
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site form post: %d, want 403", resp.StatusCode)
	}

	b.run("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("username")))
	if _, err := e.Server.Signin.SessionUser(context.Background(), session.value); err == nil {
		t.Fatal("the session still works after sign-out")
	}
	b.run("opening the tokens page signed out", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("username")))

	// Five attempts per account per window: the sixth is refused before
	// the password is even checked.
	for i := range 5 {
		b.run("opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin"), chromedp.WaitVisible(chromedp.ID("username")))
		b.signIn("mallory", "guess "+strings.Repeat("x", i))
		b.run("waiting for the refusal", chromedp.WaitVisible(chromedp.ID("error")))
	}
	b.run("opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin"), chromedp.WaitVisible(chromedp.ID("username")))
	b.signIn("mallory", goodPassword)
	b.run("waiting for the refusal", chromedp.WaitVisible(chromedp.ID("error")))
	if msg := b.text("#error"); !strings.Contains(msg, "Too many sign-in attempts") {
		t.Fatalf("the sixth attempt shows %q, want a rate limit", msg)
	}
	b.screenshot("rate-limited")
	if e.Server.Signin.Rejected() == 0 {
		t.Fatal("the limiter counted no refusal")
	}
	// Each step is in the site's audit trail, marked as done through the
	// pages; the token changes as the API's requests would be.
	wantEvents(t, signinEvents(t, e), "sign-in-failed alice", "sign-in alice", "create authentication-token alice",
		"delete authentication-token alice", "sign-out alice", "sign-in-failed mallory", "sign-in-refused mallory")
}

type networkCookie struct {
	httpOnly, secure bool
	sameSite, value  string
}

func mustUser(t *testing.T, e *testenv.Env, name string) *auth.User {
	t.Helper()
	u, err := e.Server.Auth.UserByName(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var linkRE = regexp.MustCompile(`https://\S+/app/invitations/[A-Za-z0-9_-]+`)

// TestBrowserInvitation invites an email address into an organization
// through the TFE API; the invitation email's link lets the person choose
// a password, which signs them in and makes the membership active.
func TestBrowserInvitation(t *testing.T) {
	t.Parallel()
	sink, err := mailsink.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	e := testenv.New(t, testenv.Options{SMTPAddr: sink.Addr})
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("carol@example.test")})
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != tfe.OrganizationMembershipInvited {
		t.Fatalf("new membership status %q, want invited", m.Status)
	}
	msgs := sink.All()
	if len(msgs) != 1 || len(msgs[0].To) != 1 || msgs[0].To[0] != "carol@example.test" {
		t.Fatalf("invitation emails: %+v", msgs)
	}
	link := linkRE.FindString(string(msgs[0].Data))
	if link == "" {
		t.Fatalf("the invitation email has no link:\n%s", msgs[0].Data)
	}

	b := newBrowser(t, e)
	b.run("opening the invitation", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("accept")))
	if org := b.text("#organization"); org != "acme" {
		t.Fatalf("the invitation names organization %q", org)
	}
	b.screenshot("invitation")
	// Too short a password is refused and nothing changes.
	b.run("accepting with a short password",
		chromedp.SetValue(chromedp.ID("password"), "short"),
		chromedp.SetValue(chromedp.ID("confirm"), "short"),
		chromedp.Click(chromedp.ID("accept")),
		chromedp.WaitVisible(chromedp.ID("error")))
	if msg := b.text("#error"); !strings.Contains(msg, "at least 12 characters") {
		t.Fatalf("a short password shows %q", msg)
	}
	if got, _ := e.Client.OrganizationMemberships.Read(ctx, m.ID); got == nil || got.Status != tfe.OrganizationMembershipInvited {
		t.Fatalf("membership after a refused acceptance: %+v", got)
	}
	b.run("accepting",
		chromedp.SetValue(chromedp.ID("password"), goodPassword),
		chromedp.SetValue(chromedp.ID("confirm"), goodPassword),
		chromedp.Click(chromedp.ID("accept")))
	b.waitHome(e.URL)
	got, err := e.Client.OrganizationMemberships.Read(ctx, m.ID)
	if err != nil || got.Status != tfe.OrganizationMembershipActive {
		t.Fatalf("membership after acceptance: %+v %v, want active", got, err)
	}
	// Accepting signed carol in.
	b.run("opening the tokens page", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("create-token")))
	if !strings.Contains(b.text("header"), m.User.Username) {
		t.Fatalf("signed in as %q, want %s", b.text("header"), m.User.Username)
	}
	// The link works once.
	b.run("opening the used invitation", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("message")))
	if msg := b.text("#message"); !strings.Contains(msg, "unknown or was already used") {
		t.Fatalf("a used invitation shows %q", msg)
	}
	// And the password works for signing in.
	if _, err := e.Server.Signin.CheckPassword(ctx, "carol@example.test", goodPassword, "192.0.2.1"); err != nil {
		t.Fatalf("signing in with the chosen password: %v", err)
	}
	wantEvents(t, signinEvents(t, e), "sign-in "+m.User.Username)
}

// TestLoginRequestChecks refuses authorization requests terraform would
// never send (another client, a redirect off the loopback interface or
// outside the CLI's ports, no PKCE), without redirecting anywhere.
func TestLoginRequestChecks(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	noRedirect := *e.HTTP
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	good := url.Values{"client_id": {"terraform-cli"}, "response_type": {"code"}, "redirect_uri": {"http://localhost:10000/login"},
		"state": {"s"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}}
	for name, change := range map[string][2]string{
		"client":       {"client_id", "evil"},
		"https":        {"redirect_uri", "https://localhost:10000/login"},
		"host":         {"redirect_uri", "http://evil.example:10000/login"},
		"port":         {"redirect_uri", "http://localhost:9999/login"},
		"no pkce":      {"code_challenge_method", "plain"},
		"grant":        {"response_type", "token"},
		"short chall.": {"code_challenge", "abc"},
	} {
		q := url.Values{}
		for k, v := range good {
			q[k] = v
		}
		q.Set(change[0], change[1])
		resp, err := noRedirect.Get(e.URL + "/app/oauth/authorization?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", name, resp.StatusCode)
		}
	}
	// The good request (no session) goes to the sign-in page and back.
	resp, err := noRedirect.Get(e.URL + "/app/oauth/authorization?" + good.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/app/signin?next=%2Fapp%2Foauth%2Fauthorization%3F") {
		t.Fatalf("authorization without a session: %d %s", resp.StatusCode, loc)
	}
	// An unknown code is refused the OAuth way.
	resp, err = e.HTTP.PostForm(e.URL+"/app/oauth/token", url.Values{"grant_type": {"authorization_code"}, "client_id": {"terraform-cli"},
		"code": {"nope"}, "code_verifier": {strings.Repeat("v", 43)}, "redirect_uri": {"http://localhost:10000/login"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("an unknown code: %d, want 400", resp.StatusCode)
	}
}
