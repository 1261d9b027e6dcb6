package stack_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// vcsStackFiles is a stack configuration whose one auto-approved
// deployment's value is v.
func vcsStackFiles(v string) map[string]string {
	return map[string]string{
		"main.tfcomponent.hcl": `variable "value" {
  type = string
}

component "box" {
  source    = "./modules/box"
  inputs    = { value = var.value }
  providers = {}
}

output "value" {
  type  = string
  value = component.box.value
}
`,
		"main.tfdeploy.hcl": `deployment_auto_approve "always" {
  check {
    condition = context.success
    reason    = "The plan failed."
  }
}

deployment_group "auto" {
  auto_approve_checks = [deployment_auto_approve.always]
}

deployment "only" {
  inputs           = { value = "` + v + `" }
  deployment_group = deployment_group.auto
}
`,
		"modules/box/main.tf": `variable "value" {
  type = string
}

resource "terraform_data" "v" {
  input = var.value
}

output "value" {
  value = terraform_data.v.output
}
`,
	}
}

// newVCSStack pushes files to a new repository of a Gitea beside a new
// server (store "" for the default), and makes organization acme's stack
// "vcs" in project platform connected to it: the server, Gitea, the
// repository, the pushed commit, the VCS provider and the stack.
func newVCSStack(t *testing.T, store, name string, files map[string]string) (*testenv.Env, *testenv.Gitea, string, string, *tfe.OAuthClient, *tfe.Stack) {
	t.Helper()
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{Store: store})
	repo := g.CreateRepo(t, name)
	first := g.Push(t, repo, "main", files, "first")
	c := e.Client
	o := testenv.NewOrg(t, c, "acme")
	prj, err := c.Projects.Create(ctx, o.Name, tfe.ProjectCreateOptions{Name: "platform"})
	if err != nil {
		t.Fatal(err)
	}
	oc := g.Provider(t, c, o.Name)
	st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "vcs", Project: &tfe.Project{ID: prj.ID},
		VCSRepo: &tfe.StackVCSRepoOptions{Identifier: repo, OAuthTokenID: oc.OAuthTokens[0].ID}})
	if err != nil {
		t.Fatal(err)
	}
	return e, g, repo, first, oc, st
}

// TestVCSBackedStack: a stack connected to a repository of a real Gitea,
// as HCP Terraform's VCS-backed stacks: connecting registers Terrace's
// webhook and fetches the branch head into a configuration (source
// fetch), which deploys; a push to the branch makes the next
// configuration, which deploys the pushed value; fetch-latest-from-vcs
// makes another of the same commit; a pull request's head is planned in a
// speculative configuration that deploys nothing; deleting the stack
// removes the webhook from Gitea.
func TestVCSBackedStack(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	ctx := context.Background()
	e, g, repo, _, oc, st := newVCSStack(t, "", "stacks", vcsStackFiles("one"))
	c := e.Client
	if st.VCSRepo == nil || st.VCSRepo.Identifier != repo || st.VCSRepo.Branch != "main" || st.VCSRepo.OAuthTokenID != oc.OAuthTokens[0].ID {
		t.Fatalf("the stack's vcs-repo: %+v", st.VCSRepo)
	}
	hooks := func() int {
		var hs []map[string]any
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hs)
		return len(hs)
	}
	waitUntil(t, "Terrace's webhook at Gitea", func() bool { return hooks() == 1 })

	// The branch head's configuration deploys.
	deployed := func(n int, want string) {
		t.Helper()
		var cfg *tfe.StackConfiguration
		waitUntil(t, "configuration "+want, func() bool {
			l, err := c.StackConfigurations.List(ctx, st.ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Items) > n {
				t.Fatalf("the stack has %d configurations, want %d", len(l.Items), n)
			}
			for _, it := range l.Items {
				if it.SequenceNumber == n && (it.Status == "completed" || it.Status == "failed") {
					cfg = it
				}
			}
			return cfg != nil
		})
		r := waitRun(t, c, groupRun(t, c, cfg.ID, "auto").ID, is("succeeded", "failed"))
		if r.Status != "succeeded" {
			t.Fatalf("configuration %d's run ended %s: %s", n, r.Status, diagnostics(t, c, cfg.ID))
		}
		if v := outputs(t, c, "acme", "stack-"+st.ID+"-only")["value"]; v != want {
			t.Fatalf("after configuration %d, output value = %v, want %s", n, v, want)
		}
	}
	deployed(1, "one")

	// A push to the branch deploys the pushed value, and the deployment's
	// run reports to the commit.
	second := g.Push(t, repo, "main", vcsStackFiles("two"), "second")
	deployed(2, "two")
	commitStatus(t, g, repo, second, "Terrace/acme/vcs/only", "success", "Deployed")

	// fetch-latest-from-vcs makes a configuration of the same commit.
	if _, err := c.Stacks.FetchLatestFromVcs(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	deployed(3, "two")

	// A pull request to the branch plans its head, speculatively (the
	// stack's speculative plans on): a configuration that changes nothing.
	// (go-tfe sends vcs-repo with every update: null would disconnect the
	// stack, as HCP Terraform's does; the same connection keeps its
	// webhook.)
	if up, err := c.Stacks.Update(ctx, st.ID, tfe.StackUpdateOptions{SpeculativeEnabled: tfe.Bool(true),
		VCSRepo: &tfe.StackVCSRepoOptions{Identifier: repo, OAuthTokenID: oc.OAuthTokens[0].ID}}); err != nil || up.VCSRepo == nil || !up.SpeculativeEnabled {
		t.Fatalf("turning the stack's speculative plans on: %v %+v", err, up)
	}
	if n := hooks(); n != 1 {
		t.Fatalf("Gitea has %d webhooks after the update, want the one it had", n)
	}
	fix := g.Push(t, repo, "fix", vcsStackFiles("four"), "try four")
	g.Must(t, "POST", "/repos/"+repo+"/pulls", map[string]any{"head": "fix", "base": "main", "title": "Try four"})
	var spec *tfe.StackConfiguration
	waitUntil(t, "the pull request's speculative configuration", func() bool {
		l, err := c.StackConfigurations.List(ctx, st.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if it.SequenceNumber == 4 && (it.Status == "completed" || it.Status == "failed") {
				spec = it
			}
		}
		return spec != nil
	})
	if !spec.Speculative {
		t.Fatalf("the pull request's configuration is not speculative: %+v", spec)
	}
	if r := waitRun(t, c, groupRun(t, c, spec.ID, "auto").ID, is("succeeded", "failed")); r.Status != "succeeded" {
		t.Fatalf("the pull request's plan ended %s: %s", r.Status, diagnostics(t, c, spec.ID))
	}
	if v := outputs(t, c, "acme", "stack-"+st.ID+"-only")["value"]; v != "two" {
		t.Fatalf("after the pull request's plan, output value = %v, want two (a plan changes nothing)", v)
	}
	commitStatus(t, g, repo, fix, "Terrace/acme/vcs/only", "success", "Speculative plan finished")

	// Deleting the stack removes its webhook from Gitea.
	if err := c.Stacks.ForceDelete(ctx, st.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the deleted stack's webhook's removal from Gitea", func() bool { return hooks() == 0 })
}

// manualStackFiles is vcsStackFiles without auto-approval: the plan of
// deployment "only" (group only_default) waits for an operator.
func manualStackFiles(v string) map[string]string {
	files := vcsStackFiles(v)
	files["main.tfdeploy.hcl"] = `deployment "only" {
  inputs = { value = "` + v + `" }
}
`
	return files
}

// TestVCSBackedStackRunStatuses: a VCS-backed stack's deployment runs
// report to their commit while they wait, and when they are abandoned,
// not only when they end (both stores): a run waiting for approval shows
// pending "Waiting for approval" (after "Planning") on its commit before
// it ends; approving a newer commit's run abandons the older run, whose
// commit ends with error "Deployment abandoned" (and the newer's with
// success); a canceled run's commit ends so too.
func TestVCSBackedStackRunStatuses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	for _, store := range testenv.Stores {
		t.Run(store, func(t *testing.T) {
			ctx := context.Background()
			e, g, repo, first, _, st := newVCSStack(t, store, "statuses", manualStackFiles("one"))
			c := e.Client
			const check = "Terrace/acme/vcs/only"
			// waiting returns the run of configuration n once it waits
			// for approval, after checking that its commit says so while
			// it still does.
			waiting := func(n int, sha string) *tfe.StackDeploymentRun {
				t.Helper()
				cfg := configuration(t, c, st.ID, n)
				r := waitRun(t, c, groupRun(t, c, cfg.ID, "only_default").ID, is("pre-deploying-pending-operator", "succeeded", "failed", "abandoned"))
				if r.Status != "pre-deploying-pending-operator" {
					t.Fatalf("configuration %d's run is %s, want waiting for approval: %s", n, r.Status, diagnostics(t, c, cfg.ID))
				}
				latestStatus(t, g, repo, sha, check, r.ID, "pending", "Waiting for approval")
				if r = waitRun(t, c, r.ID, func(string) bool { return true }); r.Status != "pre-deploying-pending-operator" {
					t.Fatalf("configuration %d's run is %s, want still waiting for approval", n, r.Status)
				}
				return r
			}
			r1 := waiting(1, first)
			// The run reported its start before it waited.
			commitStatus(t, g, repo, first, check, "pending", "Planning")

			// A push's run waits too; approving it abandons the first
			// run, whose commit ends so.
			second := g.Push(t, repo, "main", manualStackFiles("two"), "second")
			r2 := waiting(2, second)
			if err := c.StackDeploymentRuns.ApproveAllPlans(ctx, r2.ID); err != nil {
				t.Fatal(err)
			}
			if r := waitRun(t, c, r1.ID, is("abandoned", "succeeded", "failed")); r.Status != "abandoned" {
				t.Fatalf("the first run is %s, want abandoned by the second's approval", r.Status)
			}
			latestStatus(t, g, repo, first, check, r1.ID, "error", "Deployment abandoned")
			if r := waitRun(t, c, r2.ID, is("abandoned", "succeeded", "failed")); r.Status != "succeeded" {
				t.Fatalf("the approved run ended %s", r.Status)
			}
			latestStatus(t, g, repo, second, check, r2.ID, "success", "Deployed")

			// A canceled run's commit ends abandoned.
			third := g.Push(t, repo, "main", manualStackFiles("three"), "third")
			r3 := waiting(3, third)
			if err := c.StackDeploymentRuns.Cancel(ctx, r3.ID); err != nil {
				t.Fatal(err)
			}
			latestStatus(t, g, repo, third, check, r3.ID, "error", "Deployment abandoned")
			if v := outputs(t, c, "acme", "stack-"+st.ID+"-only")["value"]; v != "two" {
				t.Fatalf("output value = %v, want two (the abandoned runs applied nothing)", v)
			}
		})
	}
}

// configuration waits until the stack's configuration n is prepared.
func configuration(t *testing.T, c *tfe.Client, stackID string, n int) *tfe.StackConfiguration {
	t.Helper()
	var cfg *tfe.StackConfiguration
	waitUntil(t, fmt.Sprintf("configuration %d", n), func() bool {
		l, err := c.StackConfigurations.List(context.Background(), stackID, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range l.Items {
			if it.SequenceNumber == n && (it.Status == "completed" || it.Status == "failed") {
				cfg = it
			}
		}
		return cfg != nil
	})
	return cfg
}

// latestStatus waits until the latest status of context on commit sha
// (Gitea's combined status: the newest of each context) is state,
// described so, and links to deployment run runID's page.
func latestStatus(t *testing.T, g *testenv.Gitea, repo, sha, context, runID, state, description string) {
	t.Helper()
	want := state + " " + description + " …/app/acme/stack-runs/" + runID
	got := "none"
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		if s, ok := g.LatestStatus(t, repo, sha, context); ok {
			got = s.State + " " + s.Description + " " + s.Target
			if s.State == state && s.Description == description && strings.HasSuffix(s.Target, "/app/acme/stack-runs/"+runID) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the latest status %s of %s is %s, want %s", context, sha, got, want)
		}
	}
}

// commitStatus waits until commit sha of repo has a status of context in
// state, described so, linking to a stack run's page.
func commitStatus(t *testing.T, g *testenv.Gitea, repo, sha, context, state, description string) {
	t.Helper()
	waitUntil(t, "the "+state+" status "+context+" of "+sha, func() bool {
		var sts []struct {
			State       string `json:"status"`
			Context     string `json:"context"`
			Description string `json:"description"`
			Target      string `json:"target_url"`
		}
		g.Do(t, "GET", "/repos/"+repo+"/commits/"+sha+"/statuses", nil, &sts)
		for _, s := range sts {
			if s.Context == context && s.State == state && s.Description == description && strings.Contains(s.Target, "/app/acme/stack-runs/sdr-") {
				return true
			}
		}
		return false
	})
}

// waitUntil polls ok for up to two minutes.
func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come within 2m", what)
		}
	}
}
