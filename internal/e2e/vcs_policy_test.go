package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestVCSBackedPolicySet keeps an OPA policy set in a real Gitea (over
// TLS) and evaluates real plans with it, on both stores: the branch's head
// becomes the set's version when it connects, and a push changing its
// policies-path a new one (a push elsewhere none); a run is judged by the
// version of the moment: denied while the policy is mandatory, applied
// with an advisory failure after a push makes it advisory.
func TestVCSBackedPolicySet(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testVCSBackedPolicySet(t, st)
		})
	}
}

func testVCSBackedPolicySet(t *testing.T, store string) {
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{Store: store})
	policies := func(level string) map[string]string {
		return map[string]string{
			"README.md":             "# policies\n",
			"policies/guard.rego":   denyForbidden,
			"policies/policies.hcl": "policy \"guard\" {\n  query             = \"data.terraform.guard.deny\"\n  enforcement_level = \"" + level + "\"\n}\n",
		}
	}
	repo := g.CreateRepo(t, "policies")
	head := g.Push(t, repo, "main", policies("mandatory"), "mandatory guard")

	c := e.Client
	testenv.NewOrg(t, c, "acme")
	oc := g.Provider(t, c, "acme")
	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("guarded"), AutoApply: tfe.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	// A repository Gitea does not have is refused, and no set is made.
	if _, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("nowhere"), Kind: tfe.OPA,
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String("terrace/missing"), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}}); err == nil ||
		!strings.Contains(err.Error(), "terrace/missing") {
		t.Fatalf("a set of a missing repository: %v, want it refused naming the repository", err)
	}
	ps, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("from-git"), Kind: tfe.OPA, Overridable: tfe.Bool(false),
		PoliciesPath: tfe.String("policies"), Workspaces: []*tfe.Workspace{ws},
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	vr := ps.VCSRepo
	if vr == nil || vr.Identifier != repo || vr.Branch != "main" || vr.ServiceProvider != "gitea" || vr.OAuthTokenID != oc.OAuthTokens[0].ID ||
		!strings.HasPrefix(vr.WebhookURL, e.URL+"/webhooks/vcs/") {
		t.Fatalf("the set's vcs-repo: %+v", vr)
	}
	var hooks []struct {
		Config map[string]string `json:"config"`
	}
	waitFor(t, 30*time.Second, "Terrace's webhook at Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1 && hooks[0].Config["url"] == vr.WebhookURL
	})
	versions := func() int {
		var n int
		if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM policy_set_versions WHERE policy_set_id = ?`, ps.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	current := func() string {
		s, err := c.PolicySets.Read(ctx, ps.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.CurrentVersion == nil {
			return ""
		}
		return s.CurrentVersion.ID
	}
	waitFor(t, 60*time.Second, "the set's version of the branch head", func() bool { return current() != "" })
	first := current()
	if v, err := c.PolicySetVersions.Read(ctx, first); err != nil || v.Status != tfe.PolicySetVersionReady || v.Source != "gitea" ||
		v.IngressAttributes == nil || v.IngressAttributes.CommitSHA != head || v.IngressAttributes.Identifier != repo ||
		v.IngressAttributes.CommitURL != g.URL+"/"+repo+"/commit/"+head {
		t.Fatalf("the first version: %+v (ingress %+v) %v, want ready, from gitea, of commit %s", v, v.IngressAttributes, err, head)
	}
	if _, err := c.PolicySetVersions.Create(ctx, ps.ID); err == nil || !strings.Contains(err.Error(), "takes its versions from") {
		t.Fatalf("uploading a version of a VCS-backed set: %v, want it refused", err)
	}

	// The mandatory policy (not overridable) errors a forbidden run.
	r := createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, forbiddenConfig).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunErrored, tfe.RunApplied); r.Status != tfe.RunErrored {
		t.Fatalf("a run the repository's mandatory policy denies ended %s", r.Status)
	}

	// A push outside policies/ makes no version; one inside makes the
	// next (the set's pushes are handled in order, so the second's
	// version shows the first was passed over).
	docs := policies("mandatory")
	docs["README.md"] = "# policies, documented\n"
	g.Push(t, repo, "main", docs, "docs only")
	g.Push(t, repo, "main", policies("advisory"), "guard is advisory now")
	waitFor(t, 60*time.Second, "the version of the advisory push", func() bool { return current() != first })
	if n := versions(); n != 2 {
		t.Fatalf("the set has %d versions, want 2 (the docs-only push makes none)", n)
	}
	r = createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, forbiddenConfig).ID, nil)
	if r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied, tfe.RunErrored); r.Status != tfe.RunApplied {
		t.Fatalf("a run after the policy became advisory ended %s", r.Status)
	}

	// Deleting the set removes its webhook from Gitea.
	if err := c.PolicySets.Delete(ctx, ps.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the webhook's removal from Gitea", func() bool {
		hooks = nil
		return g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks) == http.StatusOK && len(hooks) == 0
	})
}
