package ui_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestCustomizationShows: what a site admin sets in the customization
// settings (go-tfe's Admin.Settings.Customization) shows where people look
// for it: the login help and the word to new users on the sign-in page,
// the footer and the support address at the foot of every page, the error
// text on error pages; kept as given in the API, and on the pages with
// scripts, event handlers and javascript: links taken out. Bad values are
// a 422 that changes nothing; only site admins read or change them. A
// real browser for the pages.
func TestCustomizationShows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	c := e.Client
	testenv.NewOrg(t, c, "acme")
	member, _ := e.UserClient(t, "acme", "member@acme.test")
	if _, err := member.Admin.Settings.Customization.Read(ctx); err == nil {
		t.Fatal("a user who is no site admin read the customization settings")
	}
	if _, err := member.Admin.Settings.Customization.Update(ctx, tfe.AdminCustomizationSettingsUpdateOptions{Footer: tfe.String("mine")}); err == nil {
		t.Fatal("a user who is no site admin changed the customization settings")
	}
	for _, bad := range []string{
		`{"data":{"type":"customization-settings","attributes":{"support-email-address":"not an address"}}}`,
		`{"data":{"type":"customization-settings","attributes":{"footer":7}}}`,
		`{"data":{"type":"customization-settings","attributes":{"banner":"x"}}}`,
		`{"data":{"type":"customization-settings","attributes":{"footer":"` + strings.Repeat("x", 17<<10) + `"}}}`,
	} {
		if status, body := e.API(t, "", "PATCH", "/api/v2/admin/customization-settings", bad); status != http.StatusUnprocessableEntity {
			t.Errorf("PATCH %.80s: %d %s, want 422", bad, status, body)
		}
	}
	if got, err := c.Admin.Settings.Customization.Read(ctx); err != nil || got.Footer != "" || got.SupportEmail != "" || got.ID != "customization" {
		t.Fatalf("after the refused changes: %+v %v", got, err)
	}

	help := `<div>Forgot it? <a href="https://help.example.com/reset">Reset</a><script>alert('help')</script></div>`
	got, err := c.Admin.Settings.Customization.Update(ctx, tfe.AdminCustomizationSettingsUpdateOptions{
		SupportEmail: tfe.String("ops@example.com"),
		LoginHelp:    tfe.String(help),
		Footer:       tfe.String(`<p onclick="alert('footer')">Run by the platform team</p>`),
		Error:        tfe.String(`<em>Ask in #platform</em> <a href="javascript:alert('error')">now</a>`),
		NewUser:      tfe.String(`New here? <a href="/app/">Start</a>`),
	})
	if err != nil || got.LoginHelp != help || got.SupportEmail != "ops@example.com" {
		t.Fatalf("update: %+v %v", got, err)
	}

	// The sign-in page, as anyone gets it.
	req, err := http.NewRequest("GET", e.URL+"/app/signin", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	for _, want := range []string{`<div class="login-help" id="login-help"><div>Forgot it? <a href="https://help.example.com/reset" rel="noopener noreferrer">Reset</a></div></div>`,
		`<div class="new-user" id="new-user">New here? <a href="/app/" rel="noopener noreferrer">Start</a></div>`, `Run by the platform team`, `mailto:ops@example.com`} {
		if !strings.Contains(page, want) {
			t.Errorf("the sign-in page lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, "alert(") {
		t.Errorf("the sign-in page carries a script of the customization:\n%s", page)
	}

	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/workspaces")
	if foot := tb.text("#site-footer"); !strings.Contains(foot, "Run by the platform team") || !strings.Contains(foot, "Support: ops@example.com") {
		t.Errorf("the footer: %q", foot)
	}
	tb.open("/app/acme/no-such-page")
	if msg := tb.text("#custom-error"); msg != "Ask in #platform now" {
		t.Errorf("the error page's text: %q", msg)
	}
	if strings.Contains(tb.html(), "alert(") {
		t.Error("a page carries a script of the customization")
	}
	tb.screenshot("error")
}
