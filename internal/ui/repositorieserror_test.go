package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// When the chosen token's repositories cannot be listed (its host is a
// closed port), the repository field's script says so after the field,
// with what the server said, instead of leaving the suggestions silently
// empty; the repository is still typed by hand. Choosing no token takes
// the notice away. On the new workspace form and on a workspace's
// version control setting.
func TestRepositoriesThatCannotBeListed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	provider := tfe.ServiceProviderType("gitea")
	oc, err := e.Client.OAuthClients.Create(ctx, "acme", tfe.OAuthClientCreateOptions{Name: tfe.String("down"), ServiceProvider: &provider,
		HTTPURL: tfe.String("http://127.0.0.1:1"), APIURL: tfe.String("http://127.0.0.1:1/api/v1"), OAuthToken: tfe.String("down-pat-1111")})
	if err != nil {
		t.Fatal(err)
	}
	tokenID := oc.OAuthTokens[0].ID
	if _, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")}); err != nil {
		t.Fatal(err)
	}
	// The route's own answer: an error, and no names.
	status, body := e.API(t, "", "GET", "/app/acme/settings/version-control/tokens/"+tokenID+"/repositories", nil)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(body), `"error"`) {
		t.Fatalf("the repositories of a token whose host is down: %d %s", status, body)
	}

	tb := newTab(t, e, e.Token)
	for _, c := range []struct{ page, form, list string }{
		{"/app/acme/workspaces", "#create-ws", "ws-repositories"},
		{"/app/acme/workspaces/app", "#ws-vcs-connect", "ws-vcs-repositories"},
	} {
		if st := tb.open(c.page); st != http.StatusOK {
			t.Fatalf("%s: %d", c.page, st)
		}
		choose := func(v string) {
			t.Helper()
			tb.waitJS(fmt.Sprintf(`(function(){var s=document.querySelector('%s select[name=oauth_token_id]'); if (!s) return false;
				s.value=%q; s.dispatchEvent(new Event('change')); return true})()`, c.form, v), "chose "+v)
		}
		notice := fmt.Sprintf(`(function(){var n=document.querySelector('#%s + .repositories-error'); return n && !n.hidden ? n.textContent : ""})()`, c.list)
		choose(tokenID)
		tb.waitJS(fmt.Sprintf(`document.querySelector('#%s').dataset.failed === %q`, c.list, tokenID), "failed to list the repositories")
		got := must(tb, chromedp.Evaluate[string](notice))
		if !strings.HasPrefix(got, "Could not list repositories: listing the repositories of Gitea") || !strings.Contains(got, "127.0.0.1:1") ||
			!strings.HasSuffix(got, "Type the repository (owner/name) instead.") {
			t.Errorf("%s: the notice says %q", c.page, got)
		}
		tb.screenshot("repositories-error")
		// The field still takes a repository typed by hand.
		tb.do(chromedp.SetValue(chromedp.CSS(c.form+` input[name=vcs_identifier]`), "acme/infra"))
		if v := fieldValue(tb, c.form, "vcs_identifier"); v != "acme/infra" {
			t.Errorf("%s: the repository field holds %q after typing", c.page, v)
		}
		choose("")
		if got := must(tb, chromedp.Evaluate[string](notice)); got != "" {
			t.Errorf("%s: with no token chosen the notice still says %q", c.page, got)
		}
	}
}
