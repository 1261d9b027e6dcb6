package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/testenv"
)

// On a new server the site admin is led to create the first organization
// and then shown the cloud block to paste.
func TestFirstRunCreatesOrganization(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	tb := newTab(t, e, e.Token)
	if st := tb.open("/"); st != http.StatusOK {
		t.Fatalf("/ answered %d", st)
	}
	if !strings.Contains(tb.text("h1"), "Welcome to Terrace") {
		t.Fatalf("first page is not the first-run page: %q at %s", tb.text("h1"), tb.location())
	}
	tb.screenshot("first-run")
	tb.do(
		chromedp.SendKeys(chromedp.CSS(`#create-org input[name=name]`), "acme"),
		chromedp.SendKeys(chromedp.CSS(`#create-org input[name=email]`), "ops@acme.test"),
	)
	tb.press(`#create-org button`)
	tb.do(chromedp.WaitVisible(chromedp.CSS(`#cloud-block`)))
	block := tb.text("#cloud-block")
	for _, want := range []string{`organization = "acme"`, `hostname     = "` + e.Host + `"`} {
		if !strings.Contains(block, want) {
			t.Errorf("cloud block lacks %s:\n%s", want, block)
		}
	}
	tb.screenshot("cloud-block")
	org, err := e.Client.Organizations.Read(context.Background(), "acme")
	if err != nil || org.Email != "ops@acme.test" {
		t.Fatalf("organization not created through the page: %v %+v", err, org)
	}
	// With an organization the front page is no longer the first-run page.
	tb.open("/app/")
	if strings.Contains(tb.text("h1"), "Welcome") || !strings.Contains(tb.location(), "/app/acme/workspaces") {
		t.Fatalf("after setup / shows %q at %s", tb.text("h1"), tb.location())
	}
}
