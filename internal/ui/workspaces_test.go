package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// The workspace list shows one page of 50 from the store, with the count
// of all that match; the lock filter counts and pages the same way, and a
// page past the last shows the last.
func TestWorkspaceListPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	var locked []string
	for i := range 53 {
		ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("w%02d", i))})
		if err != nil {
			t.Fatal(err)
		}
		if i%20 == 7 {
			if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
				t.Fatal(err)
			}
			locked = append(locked, ws.Name)
		}
	}
	tb := newTab(t, e, e.Token)
	// The first cell of each row (a row saying none matched has no link).
	rows := func() []string {
		return must(tb, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('table.workspaces tbody tr td:first-child a')).map(a => a.innerText.trim())`))
	}
	for _, tc := range []struct {
		path, total, page, first, last string
		n                              int
	}{
		{"/app/acme/workspaces", "53 workspaces", "page 1", "w00", "w49", 50},
		{"/app/acme/workspaces?page=2", "53 workspaces", "page 2", "w50", "w52", 3},
		{"/app/acme/workspaces?page=99999999999999999", "53 workspaces", "page 2", "w50", "w52", 3},
		{"/app/acme/workspaces?lock=locked", "3 workspaces", "page 1", locked[0], locked[2], 3},
		{"/app/acme/workspaces?lock=unlocked&page=2", "50 workspaces", "page 1", "w00", "w52", 50},
	} {
		if st := tb.open(tc.path); st != http.StatusOK {
			t.Fatalf("%s: %d", tc.path, st)
		}
		names := rows()
		if !strings.Contains(tb.html(), tc.total) || !strings.Contains(tb.text("nav.pages"), tc.page) ||
			len(names) != tc.n || names[0] != tc.first || names[len(names)-1] != tc.last {
			t.Errorf("%s: %d rows %v…%v, pages %q; want %s, %s, %d rows %s…%s", tc.path, len(names), first(names), lastOf(names), tb.text("nav.pages"), tc.total, tc.page, tc.n, tc.first, tc.last)
		}
	}
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

func lastOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[len(s)-1]
}

// A workspace connected to a repository (of a real Gitea) shows the
// repository, linking to it, and the branch that runs; its working
// directory too.
func TestWorkspaceShowsItsRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	repo := g.CreateRepo(t, "infra")
	sha := g.Push(t, repo, "main", map[string]string{"main.tf": "# empty\n"}, "first")
	testenv.NewOrg(t, e.Client, "acme")
	oc := g.Provider(t, e.Client, "acme")
	ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("infra"), WorkingDirectory: tfe.String("live"),
		QueueAllRuns: tfe.Bool(true), VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, e, e.Token)
	if st := tb.open("/app/acme/workspaces/infra"); st != http.StatusOK {
		t.Fatalf("the workspace page: %d", st)
	}
	if got := tb.text("#vcs-repo"); got != repo+" (gitea), branch main" {
		t.Errorf("the repository fact: %q", got)
	}
	if href := must(tb, chromedp.Evaluate[string](`document.querySelector('#vcs-repo a').href`)); href != g.URL+"/"+repo {
		t.Errorf("the repository link: %q, want %s", href, g.URL+"/"+repo)
	}
	if !strings.Contains(tb.text("dl.facts"), "Working directory") || !strings.Contains(tb.text("dl.facts"), "live") {
		t.Errorf("the facts do not show the working directory: %q", tb.text("dl.facts"))
	}
	// Connecting queued a run of the branch's head (queue-all-runs): its
	// page names the commit, linking to it.
	var runID string
	for deadline := time.Now().Add(60 * time.Second); runID == ""; time.Sleep(100 * time.Millisecond) {
		l, err := e.Client.Runs.List(ctx, ws.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) > 0 {
			runID = l.Items[0].ID
		}
		if time.Now().After(deadline) {
			t.Fatal("connecting queued no run")
		}
	}
	if st := tb.open("/app/acme/workspaces/infra/runs/" + runID); st != http.StatusOK {
		t.Fatalf("the run page: %d", st)
	}
	if got := tb.text("#run-commit"); got != "Commit "+sha[:7]+" of "+repo+", branch main" {
		t.Errorf("the run's commit: %q", got)
	}
	if href := must(tb, chromedp.Evaluate[string](`document.querySelector('#run-commit a').href`)); href != g.URL+"/"+repo+"/commit/"+sha {
		t.Errorf("the commit link: %q", href)
	}

	// The registry names where a module publishes from: a monorepo's
	// folder on a branch (its version comes from the branch's head).
	if _, err := e.Client.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		Name: tfe.String("net"), Provider: tfe.String("null"),
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID), DisplayIdentifier: tfe.String(repo),
			OrganizationName: tfe.String("acme"), Branch: tfe.String("main"), SourceDirectory: tfe.String("live")}}); err != nil {
		t.Fatal(err)
	}
	if st := tb.open("/app/acme/registry"); st != http.StatusOK {
		t.Fatalf("the registry page: %d", st)
	}
	if got := tb.text("#modules td.source"); got != repo+"/live, branch main" {
		t.Errorf("the module's source: %q", got)
	}
	if href := must(tb, chromedp.Evaluate[string](`document.querySelector('#modules td.source a').href`)); href != g.URL+"/"+repo {
		t.Errorf("the module's repository link: %q", href)
	}
}
