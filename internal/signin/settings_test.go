package signin_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/testenv"
)

const newPassword = "a different horse, battery and staple"

// signinEvents are the trail's sign-in events (resource type user) and
// token changes done through the pages, as "action user-name".
func signinEvents(t *testing.T, e *testenv.Env) []string {
	t.Helper()
	var out []string
	for _, ev := range e.AuditTrail(t) {
		if ev.Resource.Meta["source"] != audit.SourceUI {
			continue
		}
		if ev.OrganizationID != "" {
			t.Errorf("a sign-in or token event is in an organization's trail: %+v", ev)
		}
		if ev.Request.ClientIP == "" || ev.Request.ID == "" {
			t.Errorf("event %s lacks where it came from: %+v", ev.Resource.Action, ev.Request)
		}
		switch ev.Resource.Type {
		case "user":
			out = append(out, ev.Resource.Action+" "+ev.Actor.Name)
		default:
			out = append(out, fmt.Sprintf("%s %s %s", ev.Resource.Action, ev.Resource.Type, ev.Actor.Name))
		}
	}
	return out
}

// wantEvents fails unless want appears in got in order (other events may
// come between).
func wantEvents(t *testing.T, got []string, want ...string) {
	t.Helper()
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("audit trail lacks %q (in order); it holds:\n%s", want[i:], strings.Join(got, "\n"))
	}
}

// TestBrowserPasswordChange changes a password on the settings page: the
// current password is required, this browser stays signed in, every other
// session of the user ends, and only the new password works; then "sign
// out everywhere" ends this session too. Each step is in the audit trail.
func TestBrowserPasswordChange(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	alice := newUser(t, e, "alice")
	other, err := e.Server.Signin.StartSession(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, e)
	b.run("opening the settings", chromedp.Navigate(e.URL+"/app/settings/password"))
	b.signIn("alice", goodPassword)
	b.run("waiting for the settings", chromedp.WaitVisible(chromedp.ID("change-password")))
	b.screenshot("settings")

	change := func(current, next, confirm string) {
		b.t.Helper()
		b.run("changing the password",
			chromedp.SetValue(chromedp.ID("current"), current),
			chromedp.SetValue(chromedp.ID("new"), next),
			chromedp.SetValue(chromedp.ID("confirm"), confirm),
			chromedp.Click(chromedp.ID("change-password")))
	}
	change("not the password", newPassword, newPassword)
	b.waitText("#error", "current password is wrong")
	change(goodPassword, newPassword, "something else entirely")
	b.waitText("#error", "differ")
	if _, err := e.Server.Signin.SessionUser(ctx, other); err != nil {
		t.Fatalf("a refused change ended another session: %v", err)
	}
	change(goodPassword, newPassword, newPassword)
	b.run("waiting for the change", chromedp.WaitVisible(chromedp.ID("done")))
	b.screenshot("changed")
	if _, err := e.Server.Signin.SessionUser(ctx, other); err == nil {
		t.Fatal("another session of the user survived the password change")
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, "alice", goodPassword, "192.0.2.7"); err == nil {
		t.Fatal("the old password still works")
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, "alice", newPassword, "192.0.2.7"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	// This browser is still signed in.
	b.run("opening the tokens page", chromedp.Navigate(e.URL+"/app/settings/tokens"), chromedp.WaitVisible(chromedp.ID("create-token")))

	// Sign out everywhere: this session and one started elsewhere end.
	other, err = e.Server.Signin.StartSession(ctx, alice.ID)
	if err != nil {
		t.Fatal(err)
	}
	b.run("signing out everywhere", chromedp.Navigate(e.URL+"/app/settings/password"), chromedp.WaitVisible(chromedp.ID("signout-everywhere")),
		chromedp.Click(chromedp.ID("signout-everywhere")), chromedp.WaitVisible(chromedp.ID("username")))
	if _, err := e.Server.Signin.SessionUser(ctx, other); err == nil {
		t.Fatal("another session survived signing out everywhere")
	}
	b.run("opening the settings signed out", chromedp.Navigate(e.URL+"/app/settings/password"), chromedp.WaitVisible(chromedp.ID("username")))

	wantEvents(t, signinEvents(t, e), "sign-in alice", "change-password-failed alice", "change-password alice", "sign-out-everywhere alice")
}

// formClient posts the sign-in forms over plain HTTP, keeping cookies
// and the form token of the last page it read.
type formClient struct {
	t     *testing.T
	e     *testenv.Env
	c     *http.Client
	token string
}

var tokenRE = regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`)

func newFormClient(t *testing.T, e *testenv.Env) *formClient {
	jar, _ := cookiejar.New(nil)
	c := *e.HTTP
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &formClient{t: t, e: e, c: &c}
}

func (f *formClient) do(req *http.Request) (int, string) {
	f.t.Helper()
	resp, err := f.c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if m := tokenRE.FindSubmatch(body); m != nil {
		f.token = string(m[1])
	}
	return resp.StatusCode, string(body)
}

// get reads a page (and its form token).
func (f *formClient) get(path string) (int, string) {
	f.t.Helper()
	req, _ := http.NewRequest(http.MethodGet, f.e.URL+path, nil)
	return f.do(req)
}

// post posts a form, with the last page's token when withToken.
func (f *formClient) post(path string, form url.Values, withToken bool) (int, string) {
	f.t.Helper()
	if withToken {
		form.Set("csrf_token", f.token)
	}
	req, _ := http.NewRequest(http.MethodPost, f.e.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return f.do(req)
}

// TestSigninFormsNeedTheFormToken: the sign-in forms are the UI's (one
// layout and stylesheet, its form token); a browser whose form lost its
// token is refused, and so is every sign-in form posted without one,
// even same-origin and with the CSRF cookie.
func TestSigninFormsNeedTheFormToken(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	newUser(t, e, "alice")

	b := newBrowser(t, e)
	b.run("opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin"), chromedp.WaitVisible(chromedp.ID("username")))
	html := get(b, "reading the page", chromedp.OuterHTML(chromedp.CSS("html")))
	if !strings.Contains(html, `href="/app/static/app.css"`) || !strings.Contains(html, `class="top"`) {
		t.Fatalf("the sign-in page is not in the UI's layout:\n%.800s", html)
	}
	b.run("dropping the form's token", chromedp.Evaluate[chromedp.Void](`document.querySelector('form input[name=csrf_token]').remove()`))
	b.signIn("alice", goodPassword)
	b.waitText("body", "CSRF token does not match")
	b.screenshot("no-token")
	for _, c := range b.cookies(e.URL) {
		if c.Name == "__Host-terrace-session" {
			t.Fatal("a sign-in without the form token started a session")
		}
	}
	// The same form with its token signs in.
	b.run("opening the sign-in page", chromedp.Navigate(e.URL+"/app/signin"), chromedp.WaitVisible(chromedp.ID("username")))
	b.signIn("alice", goodPassword)
	b.waitHome(e.URL)

	f := newFormClient(t, e)
	if st, _ := f.get("/app/signin"); st != http.StatusOK || f.token == "" {
		t.Fatalf("the sign-in page: %d, token %q", st, f.token)
	}
	authorize := url.Values{"client_id": {"terraform-cli"}, "response_type": {"code"}, "redirect_uri": {"http://localhost:10000/login"},
		"state": {"s"}, "code_challenge": {strings.Repeat("a", 43)}, "code_challenge_method": {"S256"}, "decision": {"allow"}}
	forms := map[string]url.Values{
		"/app/signin":                   {"username": {"alice"}, "password": {goodPassword}},
		"/app/invitations/not-a-secret": {"password": {goodPassword}, "confirm": {goodPassword}},
		"/app/sso/start":                {"next": {"/app/"}},
		"/app/oauth/authorization":      authorize,
		"/app/settings/password":        {"current": {goodPassword}, "new": {newPassword}, "confirm": {newPassword}},
		"/app/signout":                  {},
	}
	for path, form := range forms {
		if st, body := f.post(path, cloneValues(form), false); st != http.StatusForbidden || !strings.Contains(body, "CSRF") {
			t.Errorf("POST %s without the form token: %d %.200s, want 403", path, st, body)
		}
	}
	// With the token each goes on to its own answer (in this order: the
	// first signs in).
	for _, c := range []struct {
		path string
		want int
	}{
		{"/app/signin", http.StatusSeeOther},                   // signed in
		{"/app/invitations/not-a-secret", http.StatusNotFound}, // no such invitation
		{"/app/sso/start", http.StatusNotFound},                // no single sign-on here
		{"/app/oauth/authorization", http.StatusSeeOther},      // to the CLI's listener
		{"/app/settings/password", http.StatusOK},              // changed
	} {
		if st, body := f.post(c.path, cloneValues(forms[c.path]), true); st != c.want {
			t.Errorf("POST %s with the form token: %d, want %d: %.300s", c.path, st, c.want, body)
		}
	}
	if _, err := e.Server.Signin.CheckPassword(context.Background(), "alice", newPassword, "192.0.2.9"); err != nil {
		t.Errorf("the password change posted with the token did not happen: %v", err)
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// TestSigninLimitsAcrossReplicas: two servers on one PostgreSQL share the
// sign-in attempt counts, so guesses spread over replicas meet the same
// limit as against one: after five wrong passwords (three on one, two on
// the other) both refuse even the right one.
func TestSigninLimitsAcrossReplicas(t *testing.T) {
	t.Parallel()
	a := testenv.New(t, testenv.Options{Store: "postgres"})
	b := testenv.New(t, testenv.ReplicaOf(t, a))
	newUser(t, a, "mallory")
	replicas := []*formClient{newFormClient(t, a), newFormClient(t, b)}
	for _, f := range replicas {
		f.get("/app/signin")
	}
	for i := range 5 {
		f := replicas[i%2]
		if st, _ := f.post("/app/signin", url.Values{"username": {"mallory"}, "password": {fmt.Sprint("guess ", i)}}, true); st != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, st)
		}
	}
	for i, f := range replicas {
		st, body := f.post("/app/signin", url.Values{"username": {"mallory"}, "password": {goodPassword}}, true)
		if st != http.StatusTooManyRequests || !strings.Contains(body, "Too many sign-in attempts") {
			t.Errorf("replica %d: the right password after five wrong ones: %d, want 429", i, st)
		}
	}
	if a.Server.Signin.Rejected() == 0 || b.Server.Signin.Rejected() == 0 {
		t.Errorf("refusals counted: %d and %d, want some on both", a.Server.Signin.Rejected(), b.Server.Signin.Rejected())
	}
	// The refusals are in the (shared) audit trail.
	wantEvents(t, signinEvents(t, a), "sign-in-failed mallory", "sign-in-refused mallory", "sign-in-refused mallory")
}
