package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// squash is s with its runs of white space made one space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

// shown is the text the first element matching sel shows (its
// innerText: a table row's cells apart), its white space squashed,
// waiting for the element to appear.
func shown(tb *tab, sel string) string {
	tb.t.Helper()
	js := fmt.Sprintf(`(function(){var e=document.querySelector(%q);return e?"+"+e.innerText:"-"})()`, sel)
	got := poll(tb, js, time.Minute, func(s string) bool { return strings.HasPrefix(s, "+") }, "text-timeout",
		func(string) string { return "no " + sel + " on the page" })
	return squash(got[1:])
}

// linkOf is the absolute URL the first link matching sel goes to ("" when
// there is none).
func linkOf(tb *tab, sel string) string {
	tb.t.Helper()
	return must(tb, chromedp.Evaluate[string](fmt.Sprintf(`(function(){var a=document.querySelector(%q);return a?a.href:""})()`, sel)))
}

// uploadSizeVersion uploads a version of an OPA set whose policies.hcl
// names one policy, size (advisory); it becomes the set's current one.
func uploadSizeVersion(t *testing.T, c *tfe.Client, setID string) {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"policies.hcl": "policy \"size\" {\n  query             = \"data.terraform.size.deny\"\n  enforcement_level = \"advisory\"\n}\n",
		"size.rego":    "package terraform.size\n\nimport rego.v1\n\ndeny contains \"too big\" if false\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	psv, err := c.PolicySetVersions.Create(ctx, setID)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.PolicySetVersions.Upload(ctx, *psv, dir); err != nil {
		t.Fatal(err)
	}
}

// The organization's policy sets, made through go-tfe: the list names
// each set's kind, scope, overridability and policy count; a set's page
// shows its policies with their enforcement levels and queries, where it
// applies (the workspaces the caller may read linked, the others by ID
// only) and its parameters by key, to those who manage policies only.
func TestPolicySetPages(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	c := e.Client
	prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "payments"})
	if err != nil {
		t.Fatal(err)
	}
	ws := map[string]*tfe.Workspace{}
	for _, name := range []string{"app", "sandbox"} {
		o := tfe.WorkspaceCreateOptions{Name: tfe.String(name)}
		if name == "sandbox" {
			o.Project = prj
		}
		if ws[name], err = c.Workspaces.Create(ctx, "acme", o); err != nil {
			t.Fatal(err)
		}
	}
	var policies []*tfe.Policy
	for _, p := range []struct {
		name, query string
		level       tfe.EnforcementLevel
	}{
		{"no-public-buckets", "data.terraform.buckets.deny", tfe.EnforcementMandatory},
		{"tagging", "data.terraform.tags.deny", tfe.EnforcementAdvisory},
	} {
		pol, err := c.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String(p.name), Kind: tfe.OPA, Query: tfe.String(p.query),
			EnforcementLevel: &p.level, Description: tfe.String("about " + p.name)})
		if err != nil {
			t.Fatal(err)
		}
		policies = append(policies, pol)
	}
	set, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("guardrails"), Kind: tfe.OPA,
		Description: tfe.String("what every deployment keeps to"), Overridable: tfe.Bool(true), Policies: policies,
		Workspaces: []*tfe.Workspace{ws["app"]}, Projects: []*tfe.Project{prj}, WorkspaceExclusions: []*tfe.Workspace{ws["sandbox"]},
		TagSelectors: []*tfe.PolicySetTagSelector{{Key: "env", Value: tfe.String("prod")}, {Key: "experimental", IsExclude: true}}})
	if err != nil {
		t.Fatal(err)
	}
	category := tfe.CategoryPolicySet
	for _, p := range []struct {
		key, value string
		sensitive  bool
	}{{"region", "eu-west-9", false}, {"api_key", "hunter2-secret", true}} {
		if _, err := c.PolicySetParameters.Create(ctx, set.ID, tfe.PolicySetParameterCreateOptions{Key: tfe.String(p.key), Value: tfe.String(p.value),
			Category: &category, Sensitive: tfe.Bool(p.sensitive)}); err != nil {
			t.Fatal(err)
		}
	}
	baseline, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("baseline"), Kind: tfe.Sentinel, Global: tfe.Bool(true),
		WorkspaceExclusions: []*tfe.Workspace{ws["sandbox"]}})
	if err != nil {
		t.Fatal(err)
	}
	// A set whose versions are uploaded: its policies are those its
	// current version's policies.hcl names.
	uploaded, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("uploaded"), Kind: tfe.OPA})
	if err != nil {
		t.Fatal(err)
	}
	uploadSizeVersion(t, c, uploaded.ID)

	// The admin finds the list from the organization's navigation.
	tb := newTab(t, e, e.Token)
	tb.open("/app/acme/workspaces")
	tb.press(`header nav a[href="/app/acme/policy-sets"]`)
	tb.waitLocation("/app/acme/policy-sets")
	if got := shown(tb, "#policy-set-total"); got != "3 policy sets" {
		t.Errorf("the list's total: %q", got)
	}
	for _, c := range []struct{ sel, want string }{
		{`tr[data-policy-set="guardrails"] td.name`, "guardrails what every deployment keeps to"},
		{`tr[data-policy-set="guardrails"] td.kind`, "OPA"},
		{`tr[data-policy-set="guardrails"] td.scope`, "1 workspace, 1 project, and workspaces its tag selectors match"},
		{`tr[data-policy-set="guardrails"] td.overridable`, "yes"},
		{`tr[data-policy-set="guardrails"] td.policies`, "2"},
		{`tr[data-policy-set="guardrails"] td.repo`, "—"},
		{`tr[data-policy-set="guardrails"] td.version`, "—"},
		{`tr[data-policy-set="baseline"] td.kind`, "Sentinel"},
		{`tr[data-policy-set="baseline"] td.scope`, "global, 1 workspace excluded"},
		{`tr[data-policy-set="baseline"] td.overridable`, "—"},
		{`tr[data-policy-set="baseline"] td.policies`, "0"},
		{`tr[data-policy-set="uploaded"] td.policies`, "from its version"},
		{`tr[data-policy-set="uploaded"] td.version`, "ready"},
		{`tr[data-policy-set="uploaded"] td.repo`, "—"},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	tb.screenshot("policy-sets")

	// The set's page, from its link.
	tb.press(`tr[data-policy-set="guardrails"] td.name a`)
	tb.waitLocation("/app/acme/policy-sets/" + set.ID)
	for _, c := range []struct{ sel, want string }{
		{"h1", "Policy set guardrails"},
		{"#description", "what every deployment keeps to"},
		{"#kind", "OPA"},
		{"#overridable", "yes: a mandatory failure waits for an override"},
		{`tr[data-policy="no-public-buckets"]`, "no-public-buckets mandatory data.terraform.buckets.deny about no-public-buckets"},
		{`tr[data-policy="tagging"]`, "tagging advisory data.terraform.tags.deny about tagging"},
		{`tr[data-scope="workspace"]`, "app workspace"},
		{`tr[data-scope="project"]`, "payments project: its workspaces"},
		{`tr[data-scope="workspace-exclusion"]`, "sandbox excluded workspace"},
		{`tr[data-scope="tag"]`, "env=prod workspaces with this tag"},
		{`tr[data-scope="tag-exclusion"]`, "experimental excluded: workspaces with this tag"},
		{`tr[data-param="region"]`, "region"},
		{`tr[data-param="api_key"]`, "api_key sensitive"},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	for sel, want := range map[string]string{
		`tr[data-scope="workspace"] a`:           "/app/acme/workspaces/app",
		`tr[data-scope="workspace-exclusion"] a`: "/app/acme/workspaces/sandbox",
		`tr[data-scope="project"] a`:             "/app/acme/workspaces?project=" + prj.ID,
	} {
		if got := linkOf(tb, sel); got != e.URL+want {
			t.Errorf("%s links to %q, want %s", sel, got, e.URL+want)
		}
	}
	// Parameter values are never shown, sensitive or not.
	if html := tb.html(); strings.Contains(html, "hunter2-secret") || strings.Contains(html, "eu-west-9") {
		t.Error("the set's page shows a parameter's value")
	}
	if tb.exists("#current-version") || tb.exists("#vcs-repo") {
		t.Error("a set that is not versioned shows versions or a repository")
	}
	tb.screenshot("policy-set")
	tb.press(`tr[data-scope="workspace"] a`)
	tb.waitLocation("/app/acme/workspaces/app")

	// A global set: everywhere but its exclusions.
	tb.open("/app/acme/policy-sets/" + baseline.ID)
	for _, c := range []struct{ sel, want string }{
		{"#kind", "Sentinel"},
		{"#global", "Every workspace of the organization, except those below."},
		{`tr[data-scope="workspace-exclusion"]`, "sandbox excluded workspace"},
		{"#policies tbody", "No policies."},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	if tb.exists("#overridable") {
		t.Errorf("a Sentinel set's page says whether it is overridable: %q", shown(tb, "#overridable"))
	}
	if got := shown(tb, "#policies thead"); got != "Policy Enforcement Description" {
		t.Errorf("a Sentinel set's policy columns: %q", got)
	}
	// An uploaded version: its policies, its status.
	tb.open("/app/acme/policy-sets/" + uploaded.ID)
	for _, c := range []struct{ sel, want string }{
		{`tr[data-policy="size"]`, "size advisory data.terraform.size.deny"},
		{"#policies-path", "the whole archive"},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	if got := shown(tb, "#current-version"); !strings.HasPrefix(got, "ready, uploaded ") {
		t.Errorf("the uploaded version: %q", got)
	}
	tb.screenshot("uploaded-policy-set")

	// A member who reads the organization, and the workspace app only,
	// reads the sets; the workspace and project they may not read are
	// there by ID only, and the parameters (listed to managers alone) not
	// at all.
	team, err := c.Teams.Create(ctx, "acme", tfe.TeamCreateOptions{Name: tfe.String("devs")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.TeamAccess.Add(ctx, tfe.TeamAccessAddOptions{Access: tfe.Access(tfe.AccessRead), Team: team, Workspace: ws["app"]}); err != nil {
		t.Fatal(err)
	}
	member := newTab(t, e, userToken(t, e, "acme", "dev@acme.test", team))
	if st := member.open("/app/acme/policy-sets"); st != http.StatusOK {
		t.Fatalf("a member opens the list: %d", st)
	}
	if got := shown(member, `tr[data-policy-set="guardrails"] td.scope`); got != "1 workspace, 1 project, and workspaces its tag selectors match" {
		t.Errorf("the member's list: %q", got)
	}
	if st := member.open("/app/acme/policy-sets/" + set.ID); st != http.StatusOK {
		t.Fatalf("a member opens the set: %d", st)
	}
	if got := linkOf(member, `tr[data-scope="workspace"] a`); got != e.URL+"/app/acme/workspaces/app" {
		t.Errorf("the member's link to app: %q", got)
	}
	for kind, id := range map[string]string{"workspace-exclusion": ws["sandbox"].ID, "project": prj.ID} {
		sel := `tr[data-scope="` + kind + `"]`
		if got := shown(member, sel); !strings.HasPrefix(got, id+" (not visible to you)") || member.exists(sel+" a") {
			t.Errorf("%s, to a member who may not read it: %q", sel, got)
		}
	}
	html := member.html()
	for _, s := range []string{"sandbox", "payments", "api_key", "region"} {
		if strings.Contains(html, s) {
			t.Errorf("the member's page shows %q", s)
		}
	}
	if member.exists("#parameters") {
		t.Error("the member is shown the parameters")
	}
	member.screenshot("policy-set-member")
}

// Who may not read the organization's policy sets through the API (a
// user of another organization; an agent token of this one) gets the
// pages' 404 or 403, as the API answers them, and nothing of the sets.
func TestPolicySetPagesNeedOrganizationRead(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	testenv.NewOrg(t, e.Client, "other")
	set, err := e.Client.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("hidden-guardrails"), Kind: tfe.OPA,
		Description: tfe.String("confidential-description")})
	if err != nil {
		t.Fatal(err)
	}
	pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
	if err != nil {
		t.Fatal(err)
	}
	agent, err := e.Client.AgentTokens.Create(ctx, pool.ID, tfe.AgentTokenCreateOptions{Description: tfe.String("agent")})
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{"/app/acme/policy-sets": "/api/v2/organizations/acme/policy-sets",
		"/app/acme/policy-sets/" + set.ID: "/api/v2/policy-sets/" + set.ID}
	for _, c := range []struct {
		who, token string
		may        bool
	}{
		{"a member", userToken(t, e, "acme", "dev@acme.test"), true},
		{"a user of another organization", userToken(t, e, "other", "stranger@other.test"), false},
		{"an agent token", agent.Token, false},
	} {
		tb := newTab(t, e, c.token)
		for page, api := range pages {
			st := tb.open(page)
			apiStatus, _ := e.API(t, c.token, "GET", api, nil)
			if c.may != (st == http.StatusOK) || (!c.may && st != http.StatusNotFound && st != http.StatusForbidden) {
				t.Errorf("%s opens %s: %d", c.who, page, st)
			}
			if c.may != (apiStatus == http.StatusOK) {
				t.Errorf("%s reads %s through the API: %d, the page answers %d", c.who, api, apiStatus, st)
			}
			html := tb.html()
			for _, s := range []string{"hidden-guardrails", "confidential-description"} {
				if strings.Contains(html, s) != c.may {
					t.Errorf("%s: %s shows %q: %v", c.who, page, s, !c.may)
				}
			}
			if !c.may {
				if got := tb.text("#error"); !strings.Contains(got, "404") && !strings.Contains(got, "403") {
					t.Errorf("%s: %s's error page: %q", c.who, page, got)
				}
			}
		}
		if !c.may {
			tb.screenshot("refused-" + strings.ReplaceAll(c.who, " ", "-"))
		}
	}
	// A set is found under its own organization only, even by whoever
	// reads both (the site admin).
	admin := newTab(t, e, e.Token)
	if st := admin.open("/app/other/policy-sets/" + set.ID); st != http.StatusNotFound || strings.Contains(admin.html(), "hidden-guardrails") {
		t.Errorf("acme's set under the organization other: %d", st)
	}
}

// A VCS-backed policy set's page names its repository, branch and
// policies path, its current version's status and the commit it came
// from (linked), and the policies its policies.hcl names; a push the set
// refuses shows as its newest version, errored with the reason, while the
// current version stays. The list says the same in short.
func TestPolicySetPageShowsItsRepository(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e, g := testenv.NewWithGitea(t, testenv.Options{})
	files := func(level string) map[string]string {
		return map[string]string{
			"README.md":             "# policies\n",
			"policies/guard.rego":   "package terraform.guard\n\nimport rego.v1\n\ndeny contains msg if {\n\tsome rc in input.plan.resource_changes\n\trc.change.after.input == \"forbidden\"\n\tmsg := \"forbidden\"\n}\n",
			"policies/policies.hcl": "policy \"guard\" {\n  query             = \"data.terraform.guard.deny\"\n  enforcement_level = \"" + level + "\"\n  description       = \"nothing forbidden\"\n}\n",
		}
	}
	repo := g.CreateRepo(t, "policies")
	head := g.Push(t, repo, "main", files("mandatory"), "mandatory guard")
	testenv.NewOrg(t, e.Client, "acme")
	oc := g.Provider(t, e.Client, "acme")
	set, err := e.Client.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("from-git"), Kind: tfe.OPA,
		PoliciesPath: tfe.String("policies"), VCSRepo: &tfe.VCSRepoOptions{Identifier: tfe.String(repo), OAuthTokenID: tfe.String(oc.OAuthTokens[0].ID)}})
	if err != nil {
		t.Fatal(err)
	}
	version := func(want string) string {
		t.Helper()
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			s, err := e.Client.PolicySets.Read(ctx, set.ID)
			if err != nil {
				t.Fatal(err)
			}
			if s.NewestVersion != nil && s.NewestVersion.ID != want {
				v, err := e.Client.PolicySetVersions.Read(ctx, s.NewestVersion.ID)
				if err != nil {
					t.Fatal(err)
				}
				if v.Status != tfe.PolicySetVersionPending {
					return v.ID
				}
			}
			if time.Now().After(deadline) {
				t.Fatal("the set made no version of the push")
			}
		}
	}
	first := version("")

	tb := newTab(t, e, e.Token)
	page := "/app/acme/policy-sets/" + set.ID
	if st := tb.open(page); st != http.StatusOK {
		t.Fatalf("the set's page: %d", st)
	}
	for _, c := range []struct{ sel, want string }{
		{"#vcs-repo", repo + " (gitea), branch main"},
		{"#policies-path", "policies"},
		{`tr[data-policy="guard"]`, "guard mandatory data.terraform.guard.deny nothing forbidden"},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	if got := shown(tb, "#current-version"); !strings.HasPrefix(got, "ready from commit "+head[:7]+" of "+repo+" ") {
		t.Errorf("the current version: %q", got)
	}
	if got := linkOf(tb, "#current-version a"); got != g.URL+"/"+repo+"/commit/"+head {
		t.Errorf("the commit link: %q", got)
	}
	if got := linkOf(tb, "#vcs-repo a"); got != g.URL+"/"+repo {
		t.Errorf("the repository link: %q", got)
	}
	if tb.exists("#newest-version") {
		t.Errorf("a newest version beside the current one: %q", tb.text("#newest-version"))
	}
	tb.screenshot("vcs-policy-set")

	// A push with a level OPA has not: the set refuses the version and
	// keeps its current one.
	bad := g.Push(t, repo, "main", files("hard-mandatory"), "a level OPA has not")
	version(first)
	tb.open(page)
	if got := shown(tb, "#current-version"); !strings.HasPrefix(got, "ready from commit "+head[:7]) {
		t.Errorf("the current version after a refused push: %q", got)
	}
	if got := shown(tb, "#newest-version"); !strings.HasPrefix(got, "errored from commit "+bad[:7]) || !strings.Contains(got, "hard-mandatory") {
		t.Errorf("the refused version: %q", got)
	}
	if got := shown(tb, `tr[data-policy="guard"]`); got != "guard mandatory data.terraform.guard.deny nothing forbidden" {
		t.Errorf("the policies after a refused push: %q", got)
	}
	tb.screenshot("vcs-policy-set-refused")

	tb.open("/app/acme/policy-sets")
	for _, c := range []struct{ sel, want string }{
		{`tr[data-policy-set="from-git"] td.repo`, repo + ", branch main"},
		{`tr[data-policy-set="from-git"] td.version`, "ready " + head[:7] + "; newest errored " + bad[:7]},
		{`tr[data-policy-set="from-git"] td.policies`, "from its version"},
		{`tr[data-policy-set="from-git"] td.scope`, "no workspaces yet"},
	} {
		if got := shown(tb, c.sel); got != c.want {
			t.Errorf("%s: %q, want %q", c.sel, got, c.want)
		}
	}
	tb.screenshot("vcs-policy-sets")
}

// A set's page reads the set's versions once: the page of a versioned
// set (a ready current version whose policies.hcl names its policies, and
// a pending newest one) costs one statement more than that of a set with
// neither versions nor policies. It used to cost two: the versions'
// status, and the current version's files again for its policies. (The
// statement runs on both stores in internal/policy's TestPageReads; this
// package starts no PostgreSQL server.)
func TestPolicySetPageReadsItsVersionsOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{})
	testenv.NewOrg(t, e.Client, "acme")
	plain, err := e.Client.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("plain"), Kind: tfe.OPA})
	if err != nil {
		t.Fatal(err)
	}
	versioned, err := e.Client.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("versioned"), Kind: tfe.OPA})
	if err != nil {
		t.Fatal(err)
	}
	uploadSizeVersion(t, e.Client, versioned.ID)
	if _, err := e.Client.PolicySetVersions.Create(ctx, versioned.ID); err != nil {
		t.Fatal(err)
	}
	// The statements of a read of a set's page (its own, not a
	// background loop's).
	cost := func(id string) (int64, string) {
		t.Helper()
		var st int
		var b []byte
		n := e.RequestStatements(t, func() { st, b = e.API(t, "", "GET", "/app/acme/policy-sets/"+id, nil) })
		if st != http.StatusOK {
			t.Fatalf("the page of %s: %d %s", id, st, b)
		}
		return n, string(b)
	}
	base, _ := cost(plain.ID)
	n, body := cost(versioned.ID)
	for _, want := range []string{`<tr data-policy="size">`, `<dd id="current-version"><span class="status`, `">ready</span>`,
		`<dd id="newest-version"><span class="status`, `">pending</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the versioned set's page lacks %q", want)
		}
	}
	if n-base > 1 {
		t.Errorf("a versioned set's page costs %d store statements, one with no versions nor policies %d: want one more at most", n, base)
	}
}
