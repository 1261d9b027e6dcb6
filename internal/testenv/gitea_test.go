package testenv_test

import (
	"net/http"
	"testing"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestGitea: the Gitea the VCS tests use starts, takes a new private
// repository and two pushes over HTTPS, and its API shows the branch at
// the second push's commit, whose parent is the first.
func TestGitea(t *testing.T) {
	t.Parallel()
	g := testenv.StartGitea(t)
	repo := g.CreateRepo(t, "infra")
	if repo != g.Admin+"/infra" {
		t.Fatalf("CreateRepo = %q", repo)
	}
	first := g.Push(t, repo, "main", map[string]string{"main.tf": "# one\n", "modules/a/a.tf": "# a\n"}, "first")
	second := g.Push(t, repo, "main", map[string]string{"main.tf": "# two\n"}, "second")
	if first == second || len(second) != 40 {
		t.Fatalf("pushes gave %q then %q", first, second)
	}
	out := g.Must(t, "GET", "/repos/"+repo+"/branches/main", nil)
	commit, _ := out["commit"].(map[string]any)
	if commit["id"] != second {
		t.Fatalf("branch main is at %v, want %s", commit["id"], second)
	}
	c := g.Must(t, "GET", "/repos/"+repo+"/git/commits/"+second, nil)
	parents, _ := c["parents"].([]any)
	if len(parents) != 1 || parents[0].(map[string]any)["sha"] != first {
		t.Fatalf("parents of the second commit = %v, want [%s]", parents, first)
	}
	// The tree is exactly the second push's files.
	if status, _ := g.Call(t, "GET", "/repos/"+repo+"/contents/modules/a/a.tf?ref="+second, nil); status != http.StatusNotFound {
		t.Fatalf("modules/a/a.tf at the second commit: %d, want 404", status)
	}
	if r := g.Must(t, "GET", "/repos/"+repo, nil); r["private"] != true {
		t.Fatalf("the repository is not private: %v", r["private"])
	}
	// Without the token the repository cannot be read (403: the server
	// asks for a sign-in before anything).
	res, err := g.HTTP.Get(g.URL + "/api/v1/repos/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden && res.StatusCode != http.StatusNotFound {
		t.Fatalf("anonymous read of a private repository: %d, want 403 or 404", res.StatusCode)
	}
}
