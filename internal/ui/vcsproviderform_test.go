package ui_test

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/terracehq/terrace/internal/testenv"
)

// chooseProvider picks provider in the add form as a person would (the
// change event app.js listens to).
func chooseProvider(tb *tab, provider string) {
	tb.t.Helper()
	tb.waitJS(fmt.Sprintf(`(function(){var s=document.querySelector('#add-vcs-provider [name=provider]'); if (!s) return false;
		s.value=%q; s.dispatchEvent(new Event('change')); return s.value===%q})()`, provider, provider), "chose "+provider)
}

// The add form starts at GitHub.com with its addresses filled in (they
// are not placeholders: a GitHub provider added without touching them is
// GitHub.com's); choosing another provider empties them and choosing
// GitHub again fills them back. A GitHub provider posted with the fields
// empty (a page without its script) gets GitHub.com's. A refusal names
// the fields by the form's labels, not the API's attributes.
func TestVCSProviderFormAddresses(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	owner := ownerTab(t, e, "acme", "owner@acme.test")
	page := "/app/acme/settings/version-control"
	if st := owner.open(page); st != http.StatusOK {
		t.Fatalf("the providers page: %d", st)
	}
	urls := func() string {
		t.Helper()
		return fieldValue(owner, "#add-vcs-provider", "provider") + " " + fieldValue(owner, "#add-vcs-provider", "http_url") + " " +
			fieldValue(owner, "#add-vcs-provider", "api_url")
	}
	if got, want := urls(), "github https://github.com https://api.github.com"; got != want {
		t.Errorf("the form starts with %q, want %q", got, want)
	}
	chooseProvider(owner, "gitea")
	if got, want := urls(), "gitea  "; got != want {
		t.Errorf("after choosing Gitea: %q, want %q", got, want)
	}
	chooseProvider(owner, "github")
	if got, want := urls(), "github https://github.com https://api.github.com"; got != want {
		t.Errorf("after choosing GitHub again: %q, want %q", got, want)
	}
	// What a person typed stays when they change their mind.
	fillForm(owner, "#add-vcs-provider", map[string]string{"http_url": "https://ghe.example.test"})
	chooseProvider(owner, "github_enterprise")
	if got, want := urls(), "github_enterprise https://ghe.example.test "; got != want {
		t.Errorf("after typing an HTTP URL and choosing GitHub Enterprise: %q, want %q", got, want)
	}
	// GitHub Enterprise without an API URL: refused in the form's words.
	fillForm(owner, "#add-vcs-provider", map[string]string{"name": "ghe", "token": "ghe-pat-1111"})
	owner.press("#add-provider")
	if got := shown(owner, "#form-error"); got != "API URL is required" {
		t.Errorf("the refusal of GitHub Enterprise without an API URL: %q", got)
	}
	owner.screenshot("vcs-provider-form-refused")

	// GitHub.com as the form starts, with a token.
	owner.open(page)
	fillForm(owner, "#add-vcs-provider", map[string]string{"name": "gh", "token": "gh-pat-2222"})
	owner.press("#add-provider")
	owner.waitJS(`!!document.querySelector('[data-vcs-name="gh"]')`, "listed the new provider")
	// And posted with empty addresses, as without the script: the
	// redirect to the list (which fetch's manual redirect shows as an
	// opaque answer, status 0).
	if st := postFrom(owner, page, map[string]string{"provider": "github", "name": "gh-bare", "http_url": "", "api_url": "",
		"token": "gh-pat-3333"}); st != 0 {
		t.Errorf("a GitHub provider posted without addresses: %d, want the redirect", st)
	}
	clients := vcsClients(t, e, "acme")
	for _, name := range []string{"gh", "gh-bare"} {
		c := clients[name]
		if c == nil || c.ServiceProvider != "github" || c.HTTPURL != "https://github.com" || c.APIURL != "https://api.github.com" {
			t.Errorf("the provider %s: %+v, want GitHub.com's", name, c)
		}
	}
	if len(clients) != 2 {
		t.Errorf("%d providers, want gh and gh-bare", len(clients))
	}
	// The page shows the chosen provider's addresses as values, never
	// as placeholders that look like defaults.
	if n := must(owner, chromedp.Evaluate[int](`document.querySelectorAll('#add-vcs-provider input[placeholder^="https://"]').length`)); n != 0 {
		t.Errorf("%d URL fields of the form have a URL as placeholder", n)
	}
}
