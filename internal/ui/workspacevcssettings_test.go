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

// TestWorkspaceVCSSettings: a workspace page's Version control setting,
// against a real Gitea in a real browser. The owner connects a CLI-driven
// workspace to a repository from its page: the page and the API show the
// repository on its default branch and Terrace's webhook appears at
// Gitea. A branch the host does not have is refused with the host's
// answer, with what was typed kept, and changes nothing; a branch pushed
// since is taken. Disconnect removes the connection and the webhook. A
// workspace reader, and an admin of another workspace who reads the VCS
// providers but only reads this workspace, get no form, and their posts
// are refused and change nothing. Each change the page makes is audited as the API's update.
func TestWorkspaceVCSSettings(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	repo := g.CreateRepo(t, "site")
	g.Push(t, repo, "main", map[string]string{"main.tf": "# empty\n"}, "first")
	org := testenv.NewOrg(t, e.Client, "acme").Name
	tokenID := g.Provider(t, e.Client, org).OAuthTokens[0].ID
	ws, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("site")})
	if err != nil {
		t.Fatal(err)
	}
	team, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("readers")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws}); err != nil {
		t.Fatal(err)
	}
	reader := newTab(t, e, userToken(t, e, org, "reader@acme.test", team))
	// An admin of another workspace reads the organization's VCS
	// providers (authz.OrgReadVCS) but only reads this one: no form
	// either.
	other, err := e.Client.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String("other")})
	if err != nil {
		t.Fatal(err)
	}
	admins, err := e.Client.Teams.Create(ctx, org, tfe.TeamCreateOptions{Name: tfe.String("other-admins")})
	if err != nil {
		t.Fatal(err)
	}
	for w, access := range map[*tfe.Workspace]tfe.AccessType{ws: tfe.AccessRead, other: tfe.AccessAdmin} {
		if _, err := e.Client.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(access), Team: admins, Workspace: w}); err != nil {
			t.Fatal(err)
		}
	}
	otherAdmin := userToken(t, e, org, "other-admin@acme.test", admins)
	elsewhere := newTab(t, e, otherAdmin)
	if st, _ := e.API(t, otherAdmin, "GET", "/api/v2/organizations/acme/oauth-tokens", nil); st != http.StatusOK {
		t.Fatalf("the other workspace's admin lists the organization's OAuth tokens: %d, want 200", st)
	}
	const page = "/app/acme/workspaces/site"

	// readVCS is the workspace's connection through go-tfe (nil for none).
	readVCS := func() *tfe.VCSRepo {
		t.Helper()
		w, err := e.Client.Workspaces.Read(ctx, org, "site")
		if err != nil {
			t.Fatal(err)
		}
		return w.VCSRepo
	}
	// updates counts the workspace's update events done through the pages.
	updates := func() int {
		t.Helper()
		n := 0
		for _, ev := range uiEvents(e.AuditTrail(t)) {
			if ev.Resource.Type == "workspace" && ev.Resource.Action == "update" && ev.Resource.ID == ws.ID {
				if ev.Resource.Meta["status"] != "200" {
					t.Errorf("page event %s: status %s, want the API's 200", describe(ev), ev.Resource.Meta["status"])
				}
				n++
			}
		}
		return n
	}
	// readerRefused: the reader, on the page, has no form, and posting
	// each form's fields is refused as the page's other actions are.
	readerRefused := func(posts map[string]map[string]string) {
		t.Helper()
		for who, tt := range map[string]*tab{"the reader": reader, "the other workspace's admin": elsewhere} {
			if st := tt.open(page); st != http.StatusOK {
				t.Fatalf("%s: the workspace page: %d", who, st)
			}
			if tt.exists("#ws-vcs-settings") || tt.exists("form[action$='/vcs']") || tt.exists("form[action$='/vcs/disconnect']") {
				t.Errorf("%s, who may not change the workspace's settings, is offered its version control setting", who)
			}
			// The page's lock, refused alike, is the measure.
			lockStatus := postFrom(tt, page+"/lock", nil)
			if lockStatus != http.StatusForbidden && lockStatus != http.StatusNotFound {
				t.Fatalf("%s: their lock: %d, want 403 or 404", who, lockStatus)
			}
			for path, fields := range posts {
				if st := postFrom(tt, page+path, fields); st != lockStatus {
					t.Errorf("%s: their post to %s: %d, want %d as their lock", who, path, st, lockStatus)
				}
			}
		}
	}

	tb := newTab(t, e, e.Token)
	if st := tb.open(page); st != http.StatusOK {
		t.Fatalf("the workspace page: %d", st)
	}
	if tb.exists("#vcs-repo") || tb.exists("#ws-vcs-disconnect") {
		t.Fatal("the CLI-driven workspace's page shows a connection")
	}
	// The connect form offers the organization's token, and choosing it
	// the repositories it reads at Gitea.
	options := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#ws-vcs-connect select[name=oauth_token_id] option')).map(o => o.value + "=" + o.textContent)`))
	if want := []string{"=Choose a provider", tokenID + "=corp gitea (Gitea)"}; strings.Join(options, "|") != strings.Join(want, "|") {
		t.Errorf("the connect form's VCS providers: %q, want %q", options, want)
	}
	tb.waitJS(`(function(){var s=document.querySelector('#ws-vcs-connect select[name=oauth_token_id]'); if (!s) return false;
		s.value="`+tokenID+`"; s.dispatchEvent(new Event('change')); return true})()`, "chose the token")
	tb.waitJS(`document.querySelector('#ws-vcs-repositories').dataset.loaded === "`+tokenID+`"`, "loaded the token's repositories")
	offered := must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#ws-vcs-repositories option')).map(o => o.value)`))
	if strings.Join(offered, ",") != repo {
		t.Errorf("the repository field offers %q, want [%s]", offered, repo)
	}
	if got := must(tb, chromedp.Evaluate[string](`document.querySelector('#ws-vcs-connect input[name=vcs_identifier]').getAttribute('list')`)); got != "ws-vcs-repositories" {
		t.Errorf("the repository field's datalist: %q", got)
	}

	// The reader can connect nothing.
	readerRefused(map[string]map[string]string{"/vcs": {"oauth_token_id": tokenID, "vcs_identifier": repo}})
	if r := readVCS(); r != nil {
		t.Fatalf("the reader's post connected the workspace: %+v", r)
	}

	// Connect: the repository on its default branch.
	fillForm(tb, "#ws-vcs-connect", map[string]string{"oauth_token_id": tokenID, "vcs_identifier": repo})
	tb.press(`#ws-vcs-connect button[type=submit]`)
	tb.waitJS(`document.querySelector('#ws-vcs-disconnect')`, "showed the connection")
	tb.waitLocation(page)
	if got := tb.text("#vcs-repo"); got != repo+" (gitea), branch main" {
		t.Errorf("the connected workspace's repository: %q", got)
	}
	if got := tb.text("#vcs-branch"); got != "main" {
		t.Errorf("the connection's branch: %q, want main", got)
	}
	if got := fieldValue(tb, "#ws-vcs-change", "vcs_branch"); got != "main" {
		t.Errorf("the branch form holds %q, want main", got)
	}
	if tb.exists("#ws-vcs-connect") {
		t.Error("the connected workspace's page still offers to connect it")
	}
	tb.screenshot("connected")
	connected := readVCS()
	if connected == nil || connected.Identifier != repo || connected.OAuthTokenID != tokenID || connected.Branch != "main" || connected.WebhookURL == "" {
		t.Fatalf("the workspace's repository through the API: %+v, want %s through %s on main", connected, repo, tokenID)
	}
	waitHooks(t, g, repo, connected.WebhookURL)
	if n := updates(); n != 1 {
		t.Errorf("%d page update events of the workspace after connecting, want 1", n)
	}

	// A branch Gitea does not have: the host's answer above the form,
	// what was typed kept, a 422, nothing changed.
	fillForm(tb, "#ws-vcs-change", map[string]string{"vcs_branch": "nope"})
	tb.press(`#ws-vcs-change button[type=submit]`)
	// The refusal's page, loaded: the page before the post has no error
	// to read, and reading it mid-navigation reads nothing.
	tb.waitLocation(page + "/vcs")
	tb.waitText("#vcs-error", "branch nope not found in "+repo, time.Minute)
	tb.screenshot("refused")
	if got := fieldValue(tb, "#ws-vcs-change", "vcs_branch"); got != "nope" {
		t.Errorf("the branch form after the refusal holds %q, want what was typed", got)
	}
	if st := must(tb, chromedp.Evaluate[int](`fetch(document.querySelector('#ws-vcs-change').action, {method: "POST", body: new URLSearchParams(new FormData(document.querySelector('#ws-vcs-change')))}).then(r => r.status)`, chromedp.EvalAwaitPromise)); st != http.StatusUnprocessableEntity {
		t.Errorf("the refusal's status: %d, want 422", st)
	}
	if r := readVCS(); r == nil || r.Branch != "main" || r.Identifier != repo || r.WebhookURL != connected.WebhookURL {
		t.Errorf("after the refused branch the API shows %+v, want %s on main as before", r, repo)
	}

	// A branch pushed since: taken, the same webhook kept.
	g.Push(t, repo, "dev", map[string]string{"main.tf": "# dev\n"}, "dev")
	if st := tb.open(page); st != http.StatusOK {
		t.Fatalf("the workspace page: %d", st)
	}
	fillForm(tb, "#ws-vcs-change", map[string]string{"vcs_branch": "dev"})
	tb.press(`#ws-vcs-change button[type=submit]`)
	tb.waitJS(`(document.querySelector('#vcs-branch') || {}).textContent === "dev"`, "showed branch dev")
	if tb.exists("#vcs-error") {
		t.Errorf("changing to dev shows an error: %q", tb.text("#vcs-error"))
	}
	if got := tb.text("#vcs-repo"); got != repo+" (gitea), branch dev" {
		t.Errorf("the workspace's repository after the change: %q", got)
	}
	if r := readVCS(); r == nil || r.Branch != "dev" || r.Identifier != repo || r.OAuthTokenID != tokenID {
		t.Fatalf("after changing to dev the API shows %+v", r)
	}
	waitHooks(t, g, repo, connected.WebhookURL)
	if n := updates(); n != 2 {
		t.Errorf("%d page update events of the workspace after changing the branch, want 2 (the refusal is none)", n)
	}

	// The reader can change and disconnect nothing.
	readerRefused(map[string]map[string]string{"/vcs": {"vcs_branch": "main"}, "/vcs/disconnect": nil})
	if r := readVCS(); r == nil || r.Branch != "dev" {
		t.Fatalf("after the reader's posts the API shows %+v, want still on dev", r)
	}

	// Disconnect: no connection, no webhook, the connect form again.
	if st := tb.open(page); st != http.StatusOK {
		t.Fatalf("the workspace page: %d", st)
	}
	tb.press(`#ws-vcs-disconnect button[type=submit]`)
	tb.waitJS(`document.querySelector('#ws-vcs-connect')`, "offered to connect again")
	tb.waitLocation(page)
	if tb.exists("#vcs-repo") || tb.exists("#vcs-connection") {
		t.Error("the disconnected workspace's page still shows a repository")
	}
	tb.screenshot("disconnected")
	if r := readVCS(); r != nil {
		t.Fatalf("after Disconnect the API shows %+v, want no repository", r)
	}
	waitHooks(t, g, repo)
	if n := updates(); n != 3 {
		t.Errorf("%d page update events of the workspace after disconnecting, want 3", n)
	}
}
