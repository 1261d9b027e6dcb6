package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestUserCommands: without a mail server, `terrace user invite-link`
// prints a link that accepts the invitation (the membership turns
// active), and `terrace user set-password` sets the password a user signs
// in with.
func TestUserCommands(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	testenv.NewOrg(t, e.Client, "acme")
	m, err := e.Client.OrganizationMemberships.Create(ctx, "acme", tfe.OrganizationMembershipCreateOptions{Email: tfe.String("erin@example.test")})
	if err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := userCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetIn(strings.NewReader(stdin))
		cmd.SetArgs(args)
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("terrace user %s: %v", strings.Join(args, " "), err)
		}
		return strings.TrimSpace(out.String())
	}
	link := run("", "invite-link", "--database", e.Opts.Database, "--hostname", e.Host, "--organization", "acme", "--email", "erin@example.test")
	if !strings.HasPrefix(link, e.URL+"/app/invitations/") {
		t.Fatalf("invite-link printed %q", link)
	}
	// A browser: the page sets the form-token cookie its form must match.
	noRedirect := *e.HTTP
	noRedirect.Jar, _ = cookiejar.New(nil)
	noRedirect.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noRedirect.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	token := regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`).FindSubmatch(page)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "acme") || token == nil {
		t.Fatalf("the invitation page (with a form token): %d\n%s", resp.StatusCode, page)
	}
	const pw = "erin's first password"
	resp, err = noRedirect.PostForm(link, url.Values{"password": {pw}, "confirm": {pw}, "csrf_token": {string(token[1])}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("accepting: %d, want 303", resp.StatusCode)
	}
	got, err := e.Client.OrganizationMemberships.Read(ctx, m.ID)
	if err != nil || got.Status != tfe.OrganizationMembershipActive {
		t.Fatalf("membership after accepting: %+v %v", got, err)
	}
	// No invited membership left: no link.
	cmd := userCmd()
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	cmd.SetArgs([]string{"invite-link", "--database", e.Opts.Database, "--organization", "acme", "--email", "erin@example.test"})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "no invited member") {
		t.Fatalf("invite-link for an active member: %v", err)
	}

	const pw2 = "erin's second password"
	if out := run(pw2+"\n", "set-password", "--database", e.Opts.Database, "--username", m.User.Username); !strings.Contains(out, "is set") {
		t.Fatalf("set-password said %q", out)
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, m.User.Username, pw2, "192.0.2.1"); err != nil {
		t.Fatalf("signing in with the password set by the CLI: %v", err)
	}
	if _, err := e.Server.Signin.CheckPassword(ctx, m.User.Username, pw, "192.0.2.1"); err == nil {
		t.Fatal("the earlier password still works")
	}
}
