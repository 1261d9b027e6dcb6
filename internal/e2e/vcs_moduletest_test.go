package e2e

import (
	"context"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestVCSModuleTests: a module publishing from a branch of a real Gitea,
// with tests enabled, tests each push to its branch and each pull
// request to it with real terraform, and each test run's outcome goes
// back to its commit (pending, then success or failure). (A module whose
// tests are off tests nothing: internal/vcs TestWebhookDeliveries.)
func TestVCSModuleTests(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testVCSModuleTests(t, st)
		})
	}
}

func testVCSModuleTests(t *testing.T, store string) {
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{Store: store})
	files := func(want string) map[string]string {
		return map[string]string{
			"main.tf": "variable \"name\" {\n  type    = string\n  default = \"world\"\n}\noutput \"greeting\" {\n  value = \"hello ${var.name}\"\n}\n",
			"tests/greeting.tftest.hcl": "run \"greets\" {\n  command = plan\n  assert {\n    condition     = output.greeting == \"" + want +
				"\"\n    error_message = \"unexpected greeting\"\n  }\n}\n",
		}
	}
	repo := g.CreateRepo(t, "terraform-null-greeter")
	g.Push(t, repo, "main", files("hello world"), "first")

	c := e.Client
	testenv.NewOrg(t, c, "acme")
	tok := g.Provider(t, c, "acme").OAuthTokens[0].ID
	if _, err := c.RegistryModules.CreateWithVCSConnection(ctx, tfe.RegistryModuleCreateWithVCSConnectionOptions{
		VCSRepo: &tfe.RegistryModuleVCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(tok), DisplayIdentifier: tfe.String(repo),
			OrganizationName: tfe.String("acme"), Branch: tfe.String("main")},
		InitialVersion: tfe.String("1.0.0"),
		TestConfig:     &tfe.RegistryModuleTestConfigOptions{TestsEnabled: tfe.Bool(true)},
	}); err != nil {
		t.Fatal(err)
	}
	id := tfe.RegistryModuleID{Organization: "acme", Name: "greeter", Provider: "null", Namespace: "acme", RegistryName: tfe.PrivateRegistry}
	if m, err := c.RegistryModules.Read(ctx, id); err != nil || m.TestConfig == nil || !m.TestConfig.TestsEnabled {
		t.Fatalf("the module: %+v, %v (tests enabled)", m, err)
	}
	const context = "Terrace/acme/greeter/null/tests"
	waitFor(t, time.Minute, "the module's webhook at Gitea", func() bool {
		var hooks []map[string]any
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1
	})

	// nth waits for the module's nth test run to end and returns it.
	nth := func(n int) *tfe.TestRun {
		t.Helper()
		var run *tfe.TestRun
		waitFor(t, 2*time.Minute, "the module's test run "+string(rune('0'+n)), func() bool {
			l, err := c.TestRuns.List(ctx, id, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) > n {
				t.Fatalf("the module has %d test runs, want %d", len(l.Items), n)
			}
			if len(l.Items) < n {
				return false
			}
			run = l.Items[0] // newest first
			return run.Status != tfe.TestRunQueued && run.Status != tfe.TestRunRunning
		})
		return run
	}

	// A push to the branch: tested, and the test passes.
	withReadme := files("hello world")
	withReadme["README.md"] = "# greeter\n"
	pushed := g.Push(t, repo, "main", withReadme, "docs") // a commit holds just the files given
	// A status links to its run's page.
	page := e.URL + "/app/acme/registry/modules/private/acme/greeter/null/tests/"
	r := nth(1)
	if r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestPass || r.TestsPassed != 1 {
		t.Fatalf("the pushed commit's test run: %+v", r)
	}
	giteaStatus(t, g, repo, pushed, context, "success", "Tests passed: 1 passed, 0 failed, 0 errored, 0 skipped", page+r.ID)

	// A pull request to the branch whose change breaks the test: tested,
	// failing, reported on its head.
	head := g.Push(t, repo, "rename", files("hello there"), "expect another greeting")
	g.Must(t, "POST", "/repos/"+repo+"/pulls", map[string]any{"head": "rename", "base": "main", "title": "Another greeting"})
	if r = nth(2); r.Status != tfe.TestRunFinished || r.TestStatus != tfe.TestFail || r.TestsFailed != 1 {
		t.Fatalf("the pull request's test run: %+v", r)
	}
	giteaStatus(t, g, repo, head, context, "failure", "Tests failed: 0 passed, 1 failed, 0 errored, 0 skipped", page+r.ID)

	// The organization's deletion removes the module's webhook from Gitea
	// (its token goes with it: the removal carries the token sealed) and
	// the test configurations the module owned.
	m, err := c.RegistryModules.Read(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Organizations.Delete(ctx, "acme"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the module's webhook's removal from Gitea after its organization's deletion", func() bool {
		var hooks []map[string]any
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 0
	})
	var left int
	if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM configuration_versions WHERE workspace_id = ?`, m.ID).Scan(&left); err != nil || left != 0 {
		t.Fatalf("test configurations of the deleted organization's module: %d, %v", left, err)
	}
}

// giteaStatus waits until the latest status of context on commit sha is
// state, described so, linking to target.
func giteaStatus(t *testing.T, g *testenv.Gitea, repo, sha, context, state, description, target string) {
	t.Helper()
	waitFor(t, time.Minute, "the "+state+" status "+context+" of "+sha+" linking to "+target, func() bool {
		s, ok := g.LatestStatus(t, repo, sha, context)
		return ok && s.State == state && s.Description == description && s.Target == target
	})
}
