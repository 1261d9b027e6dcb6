package ui_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestWorkspaceCreatedFromARepository: the new workspace form's version
// control workflow, against a real Gitea in a real browser. An owner
// picks the organization's Gitea token and types a repository: the
// workspace is connected (its page shows the repository and the default
// branch, the API its identifier and token) and Terrace's webhook is
// registered at Gitea. A repository that does not exist is the host's
// refusal, shown on the form with what was typed, and creates nothing. A
// member who may create workspaces in a project but may not read VCS
// providers gets the CLI-driven form, which still works.
func TestWorkspaceCreatedFromARepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	repo := g.CreateRepo(t, "infra")
	g.Push(t, repo, "main", map[string]string{"main.tf": "# empty\n"}, "first")
	org := testenv.NewOrg(t, e.Client, "acme").Name
	oc := g.Provider(t, e.Client, org)
	tokenID := oc.OAuthTokens[0].ID

	tb := newTab(t, e, e.Token)
	// fill opens the list, unfolds the form and types into it.
	fill := func(name, identifier string) {
		t.Helper()
		if st := tb.open("/app/acme/workspaces"); st != http.StatusOK {
			t.Fatalf("the workspace list: %d", st)
		}
		tb.do(chromedp.Click(chromedp.CSS(`details summary`)),
			chromedp.SendKeys(chromedp.CSS(`#create-ws input[name=name]`), name),
			chromedp.SetValue(chromedp.CSS(`#create-ws select[name=oauth_token_id]`), tokenID),
			chromedp.SendKeys(chromedp.CSS(`#create-ws input[name=vcs_identifier]`), identifier))
	}

	// The form offers the provider's token, named by the provider.
	if st := tb.open("/app/acme/workspaces"); st != http.StatusOK {
		t.Fatalf("the workspace list: %d", st)
	}
	options := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#ws-vcs select[name=oauth_token_id] option')).map(o => o.value + "=" + o.textContent)`))
	if want := []string{"=None (CLI-driven workflow)", tokenID + "=corp gitea (Gitea)"}; strings.Join(options, "|") != strings.Join(want, "|") {
		t.Errorf("the form's VCS providers: %q, want %q", options, want)
	}

	// Choosing the token offers the repositories it reads at Gitea.
	tb.waitJS(`(function(){var s=document.querySelector('#ws-vcs select[name=oauth_token_id]'); if (!s) return false;
		s.value="`+tokenID+`"; s.dispatchEvent(new Event('change')); return true})()`, "chose the token")
	tb.waitJS(`document.querySelector('#ws-repositories').dataset.loaded === "`+tokenID+`"`, "loaded the token's repositories")
	offered := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#ws-repositories option')).map(o => o.value)`))
	if strings.Join(offered, ",") != repo {
		t.Errorf("the repository field offers %q, want [%s]", offered, repo)
	}
	// The list is the page's organization's and its VCS readers' only.
	for _, tc := range []struct {
		who, token, path string
		status           int
	}{
		{"the owner", e.Token, "/app/acme/settings/version-control/tokens/" + tokenID + "/repositories", http.StatusOK},
		{"the owner, at another organization's path", e.Token, "/app/other/settings/version-control/tokens/" + tokenID + "/repositories", http.StatusNotFound},
		{"a member who may not read VCS providers", userToken(t, e, org, "reader@acme.test"), "/app/acme/settings/version-control/tokens/" + tokenID + "/repositories", http.StatusForbidden},
	} {
		status, b := e.API(t, tc.token, "GET", tc.path, nil)
		if status != tc.status || (status != http.StatusOK) == strings.Contains(string(b), repo) {
			t.Errorf("%s: %d %s, want %d (names only with 200)", tc.who, status, b, tc.status)
		}
	}

	// A repository the host does not have: its refusal, on the form,
	// with what was typed; no workspace.
	missing := g.Admin + "/no-such-repository"
	fill("ghost", missing)
	tb.press(`#create-ws button[type=submit]`)
	// Waited for: the page before the post may hold the element too.
	tb.waitText("#create-ws-error", "repository "+missing+" not found", time.Minute)
	tb.screenshot("refused")
	kept := must(tb, chromedp.Evaluate[[]string](`["name", "vcs_identifier", "oauth_token_id"].map(n => document.querySelector('#create-ws [name=' + n + ']').value)`))
	if want := []string{"ghost", missing, tokenID}; strings.Join(kept, "|") != strings.Join(want, "|") {
		t.Errorf("the form after the refusal holds %q, want %q", kept, want)
	}
	// The refusal is a 422 (the form as the page now holds it, sent
	// again from the page).
	if st := must(tb, chromedp.Evaluate[int](`fetch(document.querySelector('#create-ws').action, {method: "POST", body: new URLSearchParams(new FormData(document.querySelector('#create-ws')))}).then(r => r.status)`, chromedp.EvalAwaitPromise)); st != http.StatusUnprocessableEntity {
		t.Errorf("the refusal's status: %d, want 422", st)
	}
	if _, err := e.Client.Workspaces.Read(ctx, org, "ghost"); err != tfe.ErrResourceNotFound {
		t.Errorf("reading the refused workspace: %v, want not found", err)
	}

	// The repository: connected, on its default branch.
	fill("infra", repo)
	tb.press(`#create-ws button[type=submit]`)
	tb.waitLocation("/app/acme/workspaces/infra")
	if got := tb.text("#vcs-repo"); got != repo+" (gitea), branch main" {
		t.Errorf("the new workspace's repository: %q", got)
	}
	ws, err := e.Client.Workspaces.Read(ctx, org, "infra")
	if err != nil {
		t.Fatalf("the workspace made from the form: %v", err)
	}
	if ws.VCSRepo == nil || ws.VCSRepo.Identifier != repo || ws.VCSRepo.OAuthTokenID != tokenID || ws.VCSRepo.Branch != "main" {
		t.Fatalf("the workspace's repository through the API: %+v, want %s through %s on main", ws.VCSRepo, repo, tokenID)
	}
	// The webhook is registered after the connection is kept (outbox).
	waitHooks(t, g, repo, ws.VCSRepo.WebhookURL)

	// A member who creates workspaces in one project (no workspace admin
	// anywhere) may not read VCS providers: no VCS part, and the
	// CLI-driven form works.
	proj, err := e.Client.Projects.Create(ctx, org, tfe.ProjectCreateOptions{Name: "apps"})
	if err != nil {
		t.Fatal(err)
	}
	team, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("creators")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamProjectAccess.Add(ctx, tfe.TeamProjectAccessAddOptions{Access: tfe.TeamProjectAccessCustom,
		WorkspaceAccess: &tfe.TeamProjectAccessWorkspacePermissionsOptions{Create: tfe.Bool(true)},
		Team:            team, Project: proj}); err != nil {
		t.Fatal(err)
	}
	member := newTab(t, e, userToken(t, e, org, "creator@acme.test", team))
	if st := member.open("/app/acme/workspaces"); st != http.StatusOK {
		t.Fatalf("the member's workspace list: %d", st)
	}
	if !member.exists("#create-ws") {
		t.Fatal("the member, who may create workspaces in apps, has no new workspace form")
	}
	if member.exists("#ws-vcs") || member.exists(`#create-ws [name=oauth_token_id]`) {
		t.Error("the member, who may not read VCS providers, is offered them")
	}
	member.do(chromedp.Click(chromedp.CSS(`details summary`)),
		chromedp.SendKeys(chromedp.CSS(`#create-ws input[name=name]`), "cli"),
		chromedp.SetValue(chromedp.CSS(`#create-ws select[name=project]`), proj.ID))
	member.press(`#create-ws button[type=submit]`)
	member.waitLocation("/app/acme/workspaces/cli")
	cli, err := e.Client.Workspaces.Read(ctx, org, "cli")
	if err != nil {
		t.Fatalf("the member's workspace: %v", err)
	}
	if cli.VCSRepo != nil || cli.Project == nil || cli.Project.ID != proj.ID {
		t.Errorf("the member's workspace: repository %+v, project %+v; want CLI-driven in %s", cli.VCSRepo, cli.Project, proj.ID)
	}
	if member.exists("#vcs-repo") {
		t.Error("the member's CLI-driven workspace shows a repository")
	}
}
