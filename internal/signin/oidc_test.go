package signin_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/testenv"
)

// oidcProvider starts the real OpenID provider that
// tools/oidcprovider/build.sh builds (zitadel/oidc's example server) with
// Terrace's callback registered for its client "web" (secret "secret"),
// and returns its issuer URL once it answers discovery.
func oidcProvider(t *testing.T, port int, redirectURL string) string {
	t.Helper()
	bin := os.Getenv("TERRACE_TEST_OIDC_PROVIDER")
	if bin == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		version, err := os.ReadFile(filepath.Join(root, "tools", "oidcprovider", "version"))
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(root, ".cache", "oidc-provider", strings.TrimSpace(string(version)), "oidc-provider")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the OpenID provider is not built (run tools/oidcprovider/build.sh, or make oidc-provider): %v", err)
	}
	issuer := "http://localhost:" + strconv.Itoa(port) + "/"
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), "REDIRECT_URI="+redirectURL)
	var logs testenv.SyncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cancel()
		<-exited
		if t.Failed() {
			t.Logf("OpenID provider output:\n%s", logs.String())
		}
	})
	// Wait until it serves discovery (or exits).
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(issuer + ".well-known/openid-configuration")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return issuer
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("the OpenID provider exited: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the OpenID provider did not answer discovery in 30s: %v\n%s", err, logs.String())
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// TestBrowserOIDCSignIn signs in through a real OpenID provider: the
// browser goes to the provider (authorization code with PKCE, state and
// nonce), signs in there, and comes back signed in to Terrace as a user
// created for the provider's verified email address; a second sign-in
// finds the same user.
func TestBrowserOIDCSignIn(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	issuer := "http://localhost:" + strconv.Itoa(port) + "/"
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret, c.OIDCName = issuer, "web", "secret", "Example ID"
	}})
	oidcProvider(t, port, e.URL+"/app/sso/callback")
	b := newBrowser(t, e)
	signInSSO := func() {
		b.run("opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin?next=/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("sso")))
		if got := b.text("#sso"); got != "Sign in with Example ID" {
			t.Fatalf("the SSO button says %q", got)
		}
		// Terrace's own sign-in page has a #username too: wait for the
		// provider's address before looking for its form.
		b.run("going to the provider", chromedp.Click(chromedp.ID("sso")))
		b.waitFor("the SSO button leading to the provider "+issuer, func(loc string) bool { return strings.HasPrefix(loc, issuer) })
		b.run("the provider's sign-in form", chromedp.WaitVisible(chromedp.ID("username")))
		storedSealed(t, e)
		b.screenshot("oidc-provider")
		b.run("signing in at the provider",
			chromedp.SetValue(chromedp.ID("username"), "test-user@localhost"),
			chromedp.SetValue(chromedp.ID("password"), "verysecure"),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)),
			chromedp.WaitVisible(chromedp.ID("create-token")))
	}
	signInSSO()
	if loc := b.location(); loc != e.URL+"/app/settings/tokens" {
		t.Fatalf("after SSO the browser is at %s", loc)
	}
	u, err := e.Server.Auth.UserByEmail(context.Background(), "test-user@zitadel.ch")
	if err != nil {
		t.Fatalf("no user for the provider's verified email: %v", err)
	}
	if !strings.Contains(b.text("header"), u.Username) {
		t.Fatalf("signed in as %q, want %s", b.text("header"), u.Username)
	}
	b.screenshot("oidc-signed-in")
	wantEvents(t, signinEvents(t, e), "sign-in "+u.Username)

	b.run("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("sso")))
	signInSSO()
	again, err := e.Server.Auth.UserByEmail(context.Background(), "test-user@zitadel.ch")
	if err != nil || again.ID != u.ID {
		t.Fatalf("the second SSO sign-in found user %v (%v), want %s", again, err, u.ID)
	}

	// An invitation accepted with single sign-on: the provider's verified
	// address is the invited one, so the invited user signs in and the
	// membership turns active.
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("test-user2@zitadel.ch")})
	if err != nil {
		t.Fatal(err)
	}
	link, err := signin.InvitationLink(ctx, e.Server.DB, e.URL, team.Invitation{Organization: "acme", MembershipID: m.ID, UserID: m.User.ID, Email: "test-user2@zitadel.ch"})
	if err != nil {
		t.Fatal(err)
	}
	b.run("signing out", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("sso")))
	b.run("opening the invitation", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.ID("sso")))
	b.run("accepting with SSO", chromedp.Click(chromedp.ID("sso")), chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SetValue(chromedp.ID("username"), "test-user2"),
		chromedp.SetValue(chromedp.ID("password"), "verysecure"),
		chromedp.Click(chromedp.CSS(`button[type=submit]`)))
	b.waitHome(e.URL)
	got, err := e.Client.OrganizationMemberships.Read(ctx, m.ID)
	if err != nil || got.Status != tfe.OrganizationMembershipActive {
		t.Fatalf("membership after accepting with SSO: %+v %v, want active", got, err)
	}
	b.run("opening the tokens page", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("create-token")))
	if !strings.Contains(b.text("header"), m.User.Username) {
		t.Fatalf("after accepting with SSO signed in as %q, want the invited %s", b.text("header"), m.User.Username)
	}

	// A callback with a state Terrace never issued is refused.
	resp, err := e.HTTP.Get(e.URL + "/app/sso/callback?state=forged&code=whatever")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a forged callback: %d, want 400", resp.StatusCode)
	}
}

// storedSealed checks what the store keeps while a sign-in is at the
// provider: the nonce and the PKCE verifier are sealed (they open under
// their own column's purpose), so reading the store does not let anyone
// redeem the code the provider is about to hand out.
func storedSealed(t *testing.T, e *testenv.Env) {
	t.Helper()
	rows, err := e.Server.DB.Query(context.Background(), `SELECT nonce, code_verifier FROM oidc_states`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var nonce, verifier string
		if err := rows.Scan(&nonce, &verifier); err != nil {
			t.Fatal(err)
		}
		n++
		if !e.Server.Keys.IsSealed("oidc_states.nonce", nonce) {
			t.Errorf("oidc_states.nonce is stored as %q, want it sealed", nonce)
		}
		if !e.Server.Keys.IsSealed("oidc_states.code_verifier", verifier) {
			t.Errorf("oidc_states.code_verifier is stored as %q, want it sealed", verifier)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no sign-in in progress is stored")
	}
}

// TestBrowserOIDCRefusesASuspendedUser: single sign-on through the real
// OpenID provider for a user a site admin has suspended (the user the
// provider's verified address names) is refused, as the password
// sign-in refuses it (TestSuspendedUserCannotSignIn): the page says why,
// no session starts, and the refusal is in the audit trail; unsuspended,
// the same sign-in succeeds.
func TestBrowserOIDCRefusesASuspendedUser(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	issuer := "http://localhost:" + strconv.Itoa(port) + "/"
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret, c.OIDCName = issuer, "web", "secret", "Example ID"
	}})
	oidcProvider(t, port, e.URL+"/app/sso/callback")
	ctx := context.Background()
	u, err := e.Server.Auth.CreateUser(ctx, e.Server.DB, "zed", "test-user@zitadel.ch", false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.Admin.Users.Suspend(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e)
	signInSSO := func(what string) {
		t.Helper()
		b.run(what+": opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin?next=/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("sso")))
		b.run(what+": going to the provider", chromedp.Click(chromedp.ID("sso")))
		b.waitFor(what+": the SSO button leading to the provider", func(loc string) bool { return strings.HasPrefix(loc, issuer) })
		b.run(what+": signing in at the provider",
			chromedp.WaitVisible(chromedp.ID("username")),
			chromedp.SetValue(chromedp.ID("username"), "test-user@localhost"),
			chromedp.SetValue(chromedp.ID("password"), "verysecure"),
			chromedp.Click(chromedp.CSS(`button[type=submit]`)))
		b.waitFor(what+": back at Terrace", func(loc string) bool { return strings.HasPrefix(loc, e.URL) })
	}

	signInSSO("suspended")
	b.waitText("#message", "suspended")
	for _, c := range b.cookies(e.URL) {
		if c.Name == signin.CookieName {
			t.Fatal("a suspended user's single sign-on started a session")
		}
	}
	b.run("opening a page that needs a session", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("sso")))
	wantEvents(t, signinEvents(t, e), "sign-in-refused zed")
	if again, err := e.Server.Auth.UserByEmail(ctx, "test-user@zitadel.ch"); err != nil || again.ID != u.ID {
		t.Fatalf("the refused sign-in's user: %+v, %v; want %s, no new one", again, err, u.ID)
	}

	if _, err := e.Client.Admin.Users.Unsuspend(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	signInSSO("unsuspended")
	b.run("the unsuspended user's page", chromedp.WaitVisible(chromedp.ID("create-token")))
	if !strings.Contains(b.text("header"), "zed") {
		t.Fatalf("signed in as %q, want zed", b.text("header"))
	}
	wantEvents(t, signinEvents(t, e), "sign-in-refused zed", "sign-in zed")
}
