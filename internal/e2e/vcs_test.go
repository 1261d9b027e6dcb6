package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/testenv"
	"github.com/terracehq/terrace/internal/vcs"
)

// TestVCSDrivenWorkspace: a workspace connected to a repository of a real
// Gitea through an OAuth client of its organization, as a platform team
// would connect one to GitHub. Connecting registers Terrace's webhook at
// Gitea and fetches the branch head into a configuration version (no run:
// queue-all-runs is off). A push to the branch makes Gitea deliver the
// webhook; Terrace fetches the commit with git, makes a configuration
// version of exactly its files (source gitea) and runs it (auto-apply):
// the state holds what the pushed file says, and the commit gets
// Terrace's statuses up to success. A push that changes no file in the
// working directory, and a push to another branch, start nothing; a
// delivery not signed with the webhook's secret is refused. A pull request
// to the branch gets a speculative plan of its head, with its status.
// Disconnecting, and deleting the workspace, remove the webhook from
// Gitea; deleting the VCS provider disconnects its workspaces.
func TestVCSDrivenWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	engines(t)
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			testVCSDrivenWorkspace(t, st)
		})
	}
}

func testVCSDrivenWorkspace(t *testing.T, store string) {
	ctx := context.Background()
	// Gitea's certificate comes from a CA of the test's, which Terrace is
	// told to trust (--vcs-ca-file); Gitea trusts Terrace's for the
	// webhooks it delivers.
	e, g := testenv.NewWithGitea(t, testenv.Options{Store: store})
	repo := g.CreateRepo(t, "infra")
	config := func(v string) string {
		return fmt.Sprintf("resource \"terraform_data\" \"v\" {\n  input = %q\n}\noutput \"v\" {\n  value = terraform_data.v.output\n}\n", v)
	}
	g.Push(t, repo, "main", map[string]string{"live/main.tf": config("one"), "docs/README.md": "# infra\n"}, "first")

	c := e.Client
	testenv.NewOrg(t, c, "acme")
	oc := g.Provider(t, c, "acme")
	// A repository the token cannot see is refused with Gitea's answer,
	// and no workspace is made.
	if _, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("nowhere"),
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String("terrace/missing"), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}}); err == nil ||
		!strings.Contains(err.Error(), "terrace/missing") {
		t.Fatalf("connecting to a missing repository: %v, want it refused naming the repository", err)
	}
	if _, err := c.Workspaces.Read(ctx, "acme", "nowhere"); err != tfe.ErrResourceNotFound {
		t.Fatalf("the workspace of a refused connection: %v, want none", err)
	}

	ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("infra"), AutoApply: tfe.Bool(true),
		WorkingDirectory: tfe.String("live"), VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	vr := ws.VCSRepo
	if vr == nil || vr.Identifier != repo || vr.Branch != "main" || vr.ServiceProvider != "gitea" || vr.OAuthTokenID != oc.OAuthTokens[0].ID ||
		vr.RepositoryHTTPURL != g.URL+"/"+repo || !strings.HasPrefix(vr.WebhookURL, e.URL+"/webhooks/vcs/") {
		t.Fatalf("the workspace's vcs-repo: %+v", vr)
	}
	// The site admin's view names the repository too (go-tfe's AdminVCSRepo).
	if aw, err := c.Admin.Workspaces.Read(ctx, ws.ID); err != nil || aw.VCSRepo == nil || aw.VCSRepo.Identifier != repo {
		t.Fatalf("the admin API's workspace: %+v, %v", aw, err)
	}
	if l, err := c.Admin.Workspaces.List(ctx, &tfe.AdminWorkspaceListOptions{Query: "infra"}); err != nil || len(l.Items) != 1 || l.Items[0].VCSRepo == nil || l.Items[0].VCSRepo.Identifier != repo {
		t.Fatalf("the admin API's list: %+v, %v", l, err)
	}

	// Terrace registered its webhook at Gitea.
	var hooks []struct {
		ID     int64             `json:"id"`
		Config map[string]string `json:"config"`
		Events []string          `json:"events"`
	}
	waitFor(t, 30*time.Second, "Terrace's webhook at Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1
	})
	if hooks[0].Config["url"] != vr.WebhookURL || !slices.Contains(hooks[0].Events, "push") {
		t.Fatalf("the webhook at Gitea: %+v, want %s for pushes", hooks[0], vr.WebhookURL)
	}
	// A registration whose recording was lost (the server stopped after
	// Gitea made the hook, before its ID was stored) is retried: the
	// retry removes the hook it cannot account for and makes one, so
	// that Gitea never delivers a push twice. (The pushes below come
	// through the new hook, signed with the connection's secret.)
	hookID := func() (id string) {
		if err := e.Server.DB.QueryRow(ctx, `SELECT provider_hook_id FROM vcs_connections WHERE workspace_id = ?`, ws.ID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	// Gitea shows the hook as soon as it made it; Terrace records its
	// ID once Gitea's answer is back: wait for the record too.
	first := ""
	waitFor(t, 30*time.Second, "the webhook's ID recorded", func() bool {
		first = hookID()
		return first != ""
	})
	if first != strconv.FormatInt(hooks[0].ID, 10) {
		t.Fatalf("the recorded webhook ID %q, want Gitea's %d", first, hooks[0].ID)
	}
	if _, err := e.Server.DB.Exec(ctx, `UPDATE vcs_connections SET provider_hook_id = '' WHERE workspace_id = ?`, ws.ID); err != nil {
		t.Fatal(err)
	}
	// The registration's item, as the outbox keeps it until it succeeds
	// (a delivered item is deleted).
	webhook := strings.TrimPrefix(vr.WebhookURL, e.URL+vcs.WebhookPath)
	if n, err := e.Server.VCS.Queue().Enqueue(ctx, e.Server.DB, outbox.Message{Key: "hook:" + webhook, Lane: ws.ID, Payload: webhook}); err != nil || n != 1 {
		t.Fatalf("queueing the registration again: %d, %v", n, err)
	}
	e.Server.VCS.Queue().Wake().Local()
	waitFor(t, 30*time.Second, "the webhook registered again", func() bool {
		id := hookID()
		return id != "" && id != first
	})
	hooks = nil
	g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
	if len(hooks) != 1 || strconv.FormatInt(hooks[0].ID, 10) != hookID() || hooks[0].Config["url"] != vr.WebhookURL {
		t.Fatalf("the webhooks at Gitea after the retried registration: %+v, want only the one recorded (%s)", hooks, hookID())
	}
	// The branch head was fetched into a configuration version; no run.
	waitFor(t, 60*time.Second, "the connection's configuration version", func() bool {
		l, err := c.ConfigurationVersions.List(ctx, ws.ID, nil)
		return err == nil && len(l.Items) == 1 && l.Items[0].Status == tfe.ConfigurationUploaded
	})
	if runs, err := c.Runs.List(ctx, ws.ID, nil); err != nil || len(runs.Items) != 0 {
		t.Fatalf("runs after connecting: %v %v, want none (queue-all-runs is off)", runs, err)
	}

	// A run task before the plan (a real task service: it passes) hears
	// which repository, branch and commit a run is of.
	const taskKey = "vcs-task-hmac-key"
	svc := newTaskService(t, e, taskKey)
	task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: svc.srv.URL + "/pass", Category: "task", HMACKey: tfe.String(taskKey)})
	if err != nil {
		t.Fatal(err)
	}
	stages := []tfe.Stage{tfe.PrePlan}
	if _, err := c.WorkspaceRunTasks.Create(ctx, ws.ID, tfe.WorkspaceRunTaskCreateOptions{EnforcementLevel: tfe.Mandatory, Stages: &stages, RunTask: task}); err != nil {
		t.Fatal(err)
	}

	// A push to the branch runs.
	sha2 := g.Push(t, repo, "main", map[string]string{"live/main.tf": config("two"), "docs/README.md": "# infra\n"}, "Raise v to two\n\nBody.")
	r := waitNthRun(ctx, t, c, ws.ID, 1)
	if r.Message != "Raise v to two" || r.Source != "tfe-configuration-version" {
		t.Errorf("the push's run: message %q, source %q", r.Message, r.Source)
	}
	r = waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
	cv, err := c.ConfigurationVersions.ReadWithOptions(ctx, r.ConfigurationVersion.ID,
		&tfe.ConfigurationVersionReadOptions{Include: []tfe.ConfigVerIncludeOpt{tfe.ConfigVerIngressAttributes}})
	if err != nil {
		t.Fatal(err)
	}
	if cv.Source != "gitea" {
		t.Errorf("the run's configuration version has source %q, want gitea", cv.Source)
	}
	// Its ingress attributes say which commit it is, and who pushed it.
	if ia := cv.IngressAttributes; ia == nil || ia.CommitSHA != sha2 || ia.Branch != "main" || ia.Identifier != repo || !ia.OnDefaultBranch ||
		ia.CommitURL != g.URL+"/"+repo+"/commit/"+sha2 || !strings.HasSuffix(ia.CompareURL, "..."+sha2) || ia.SenderUsername != g.Admin ||
		ia.CloneURL != g.URL+"/"+repo+".git" || ia.IsPullRequest || strings.TrimSpace(ia.CommitMessage) != "Raise v to two\n\nBody." {
		t.Errorf("the push's ingress attributes: %+v", ia)
	}
	if status, b := e.API(t, "", "GET", "/api/v2/configuration-versions/"+cv.ID+"/ingress-attributes", nil); status != http.StatusOK ||
		!strings.Contains(string(b), `"commit-sha":"`+sha2+`"`) || !strings.Contains(string(b), `"type":"ingress-attributes"`) {
		t.Errorf("GET the version's ingress-attributes: %d %s", status, b)
	}
	tgz, err := c.ConfigurationVersions.Download(ctx, cv.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := testenv.Untar(t, tgz); fmt.Sprint(got) != fmt.Sprint(map[string]string{"docs/README.md": "# infra\n", "live/main.tf": config("two")}) {
		t.Errorf("the configuration version's files: %v, want exactly the commit's", got)
	}
	checkStateOutputs(ctx, t, c, ws.ID, map[string]string{"v": "two"})
	calls := svc.wait(r.ID, 1)
	str := func(p *string) string {
		if p == nil {
			return "<null>"
		}
		return *p
	}
	if p := calls[0].Payload; str(p.VCSRepoURL) != g.URL+"/"+repo+".git" || str(p.VCSBranch) != "main" ||
		str(p.VCSCommitURL) != g.URL+"/"+repo+"/commit/"+sha2 || p.VCSPullRequestURL != nil {
		t.Errorf("the run task request's VCS fields: repo %s, branch %s, commit %s, pull request %s",
			str(p.VCSRepoURL), str(p.VCSBranch), str(p.VCSCommitURL), str(p.VCSPullRequestURL))
	}
	// The commit's statuses end in success, linking to the run.
	waitForStatus(t, g, repo, sha2, "success", r.ID)

	// A forged delivery is refused.
	res, err := e.HTTP.Post(vr.WebhookURL, "application/json", strings.NewReader(`{"ref":"refs/heads/main","after":"`+sha2+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned delivery: %d, want 401", res.StatusCode)
	}
	// Pushes that change nothing in the working directory, or go to
	// another branch, start nothing: the next run is the next push's to
	// live/ (a workspace's pushes are fetched in order).
	g.Push(t, repo, "main", map[string]string{"live/main.tf": config("two"), "docs/README.md": "# infra, documented\n"}, "docs only")
	g.Push(t, repo, "feature", map[string]string{"live/main.tf": config("feature"), "docs/README.md": "x"}, "on a feature branch")
	g.Push(t, repo, "main", map[string]string{"live/main.tf": config("three"), "docs/README.md": "# infra, documented\n"}, "Raise v to three")
	r = waitNthRun(ctx, t, c, ws.ID, 2)
	if r.Message != "Raise v to three" {
		t.Fatalf("the second run is %q's, want the push of v three's (the docs-only and feature pushes start nothing)", r.Message)
	}
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunApplied)
	checkStateOutputs(ctx, t, c, ws.ID, map[string]string{"v": "three"})

	// A pull request to the branch gets a speculative plan of its head,
	// and its head commit the plan's status.
	head := g.Push(t, repo, "fix", map[string]string{"live/main.tf": config("four"), "docs/README.md": "# infra, documented\n"}, "Try four")
	g.Must(t, "POST", "/repos/"+repo+"/pulls", map[string]any{"head": "fix", "base": "main", "title": "Try v four"})
	r = waitNthRun(ctx, t, c, ws.ID, 3)
	if !strings.HasPrefix(r.Message, "Pull request #") || !strings.HasSuffix(r.Message, ": Try v four") || !r.PlanOnly {
		t.Fatalf("the pull request's run: message %q, plan only %v", r.Message, r.PlanOnly)
	}
	waitRun(ctx, t, c, r.ID, 3*time.Minute, tfe.RunPlannedAndFinished)
	checkStateOutputs(ctx, t, c, ws.ID, map[string]string{"v": "three"})
	cv, err = c.ConfigurationVersions.ReadWithOptions(ctx, r.ConfigurationVersion.ID,
		&tfe.ConfigurationVersionReadOptions{Include: []tfe.ConfigVerIncludeOpt{tfe.ConfigVerIngressAttributes}})
	if err != nil {
		t.Fatal(err)
	}
	if ia := cv.IngressAttributes; !cv.Speculative || ia == nil || !ia.IsPullRequest || ia.PullRequestTitle != "Try v four" || ia.CommitSHA != head ||
		ia.Branch != "fix" || ia.OnDefaultBranch || !strings.HasPrefix(ia.PullRequestURL, g.URL+"/"+repo+"/pulls/") {
		t.Errorf("the pull request's configuration version: speculative %v, ingress attributes %+v", cv.Speculative, ia)
	}
	waitForStatus(t, g, repo, head, "success", r.ID)

	// Disconnecting removes the webhook from Gitea.
	ws, err = c.Workspaces.RemoveVCSConnection(ctx, "acme", "infra")
	if err != nil {
		t.Fatal(err)
	}
	if ws.VCSRepo != nil {
		t.Errorf("vcs-repo after disconnecting: %+v", ws.VCSRepo)
	}
	if aw, err := c.Admin.Workspaces.Read(ctx, ws.ID); err != nil || aw.VCSRepo != nil {
		t.Errorf("the admin API's workspace after disconnecting: %+v, %v", aw, err)
	}
	waitFor(t, 30*time.Second, "the webhook's removal from Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 0
	})

	// Connected again, then the workspace deleted: its webhook leaves
	// Gitea too.
	ws, err = c.Workspaces.Update(ctx, "acme", "infra", tfe.WorkspaceUpdateOptions{VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo),
		OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if ws.VCSRepo == nil || ws.VCSRepo.WebhookURL == vr.WebhookURL {
		t.Fatalf("reconnected: %+v, want a connection with a new webhook", ws.VCSRepo)
	}
	waitFor(t, 30*time.Second, "the new webhook at Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1 && hooks[0].Config["url"] == ws.VCSRepo.WebhookURL
	})
	// Its VCS provider scoped to the workspace's project alone: the
	// workspace may not move to another project, until the provider is
	// scoped to that one too.
	elsewhere, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.OAuthClients.Update(ctx, oc.ID, tfe.OAuthClientUpdateOptions{OrganizationScoped: tfe.Bool(false)}); err != nil {
		t.Fatal(err)
	}
	if err := c.OAuthClients.AddProjects(ctx, oc.ID, tfe.OAuthClientAddProjectsOptions{Projects: []*tfe.Project{{ID: ws.Project.ID}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Workspaces.Update(ctx, "acme", "infra", tfe.WorkspaceUpdateOptions{Project: elsewhere}); err == nil ||
		!strings.Contains(err.Error(), "not scoped to that project") {
		t.Fatalf("moving the workspace where its provider is not scoped: %v, want it refused", err)
	}
	if err := c.OAuthClients.AddProjects(ctx, oc.ID, tfe.OAuthClientAddProjectsOptions{Projects: []*tfe.Project{elsewhere}}); err != nil {
		t.Fatal(err)
	}
	if moved, err := c.Workspaces.Update(ctx, "acme", "infra", tfe.WorkspaceUpdateOptions{Project: elsewhere}); err != nil ||
		moved.Project.ID != elsewhere.ID || moved.VCSRepo == nil {
		t.Fatalf("moving the workspace where its provider is scoped: %v, %v", moved, err)
	}
	if err := c.Workspaces.Delete(ctx, "acme", "infra"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the deleted workspace's webhook's removal from Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 0
	})

	// Another workspace connected, then its VCS provider deleted: the
	// workspace loses its connection with the provider's token, and
	// deliveries to its webhook find nothing.
	second, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("second"),
		VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the second workspace's webhook at Gitea", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 1
	})
	if err := c.OAuthClients.Delete(ctx, oc.ID); err != nil {
		t.Fatal(err)
	}
	if ws, err = c.Workspaces.Read(ctx, "acme", "second"); err != nil || ws.VCSRepo != nil {
		t.Fatalf("the workspace after its VCS provider was deleted: %v, %v, want no vcs-repo", ws, err)
	}
	// Its webhook goes from Gitea too: the removal carries the deleted
	// token's credential, sealed.
	waitFor(t, 30*time.Second, "the webhook's removal from Gitea after its provider's deletion", func() bool {
		hooks = nil
		g.Do(t, "GET", "/repos/"+repo+"/hooks", nil, &hooks)
		return len(hooks) == 0
	})
	res, err = e.HTTP.Post(second.VCSRepo.WebhookURL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("a delivery to a removed connection's webhook: %d, want 404", res.StatusCode)
	}
}

// waitForStatus waits until a commit has Terrace's status state, linking
// to run runID.
func waitForStatus(t *testing.T, g *testenv.Gitea, repo, sha, state, runID string) {
	t.Helper()
	waitFor(t, 60*time.Second, "the "+state+" status of commit "+sha, func() bool {
		var sts []struct {
			State  string `json:"status"`
			Ctx    string `json:"context"`
			Target string `json:"target_url"`
		}
		g.Do(t, "GET", "/repos/"+repo+"/commits/"+sha+"/statuses", nil, &sts)
		for _, s := range sts {
			if s.State == state && s.Ctx == "Terrace/acme/infra" && strings.HasSuffix(s.Target, "/runs/"+runID) {
				return true
			}
		}
		return false
	})
}

// waitFor polls ok until it holds, failing the test after limit.
func waitFor(t *testing.T, limit time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !ok(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not come within %s", what, limit)
		}
	}
}

// waitNthRun waits until a workspace has n runs and returns the newest.
func waitNthRun(ctx context.Context, t *testing.T, c *tfe.Client, workspaceID string, n int) *tfe.Run {
	t.Helper()
	var newest *tfe.Run
	waitFor(t, 60*time.Second, fmt.Sprintf("run %d of the workspace", n), func() bool {
		l, err := c.Runs.List(ctx, workspaceID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) > n {
			t.Fatalf("the workspace has %d runs, want %d", len(l.Items), n)
		}
		if len(l.Items) == n {
			newest = l.Items[0]
		}
		return newest != nil
	})
	return newest
}
