package policy_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/testenv"
)

// TestSetsApply: which sets apply to a workspace, on both stores: global
// sets minus excluded workspaces and projects, sets naming the workspace,
// sets naming its project minus excluded workspaces; and a sensitive
// parameter is never returned.
func TestSetsApply(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "payments"})
		if err != nil {
			t.Fatal(err)
		}
		ws := map[string]*tfe.Workspace{}
		for _, name := range []string{"plain", "inproject", "excluded", "other"} {
			opts := tfe.WorkspaceCreateOptions{Name: tfe.String(name)}
			if name == "inproject" || name == "excluded" {
				opts.Project = prj
			}
			if ws[name], err = c.Workspaces.Create(ctx, "acme", opts); err != nil {
				t.Fatal(err)
			}
		}
		applies := func(name string) bool {
			ok, err := e.Server.Policies.Applies(ctx, e.Server.DB, "acme", ws[name].ID, "")
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		check := func(step string, want map[string]bool) {
			t.Helper()
			for name, w := range want {
				if got := applies(name); got != w {
					t.Errorf("%s: sets apply to %s: %v, want %v", step, name, got, w)
				}
			}
		}
		check("no sets", map[string]bool{"plain": false, "inproject": false, "excluded": false, "other": false})

		direct, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("direct"), Kind: tfe.OPA, Workspaces: []*tfe.Workspace{ws["plain"]}})
		if err != nil {
			t.Fatal(err)
		}
		check("a set on one workspace", map[string]bool{"plain": true, "inproject": false, "other": false})
		if err := c.PolicySets.Delete(ctx, direct.ID); err != nil {
			t.Fatal(err)
		}

		byProject, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("project"), Kind: tfe.OPA,
			Projects: []*tfe.Project{prj}, WorkspaceExclusions: []*tfe.Workspace{ws["excluded"]}})
		if err != nil {
			t.Fatal(err)
		}
		check("a set on a project", map[string]bool{"plain": false, "inproject": true, "excluded": false, "other": false})
		// A run created in the project's workspace (its task stages are
		// prepared with the project the request read) gets the set's
		// post-plan stage; one in a workspace outside the project none.
		for name, want := range map[string]int{"inproject": 1, "plain": 0} {
			cv := testenv.UploadConfig(ctx, t, c, ws[name].ID, `resource "terraform_data" "x" {}`)
			r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws[name], ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
			if err != nil {
				t.Fatal(err)
			}
			var stages int
			if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM task_stages WHERE run_id = ? AND stage = 'post_plan'`, r.ID).Scan(&stages); err != nil || stages != want {
				t.Errorf("a run in %s has %d post-plan stages (%v), want %d", name, stages, err, want)
			}
		}
		if err := c.PolicySets.Delete(ctx, byProject.ID); err != nil {
			t.Fatal(err)
		}

		global, err := c.PolicySets.Create(ctx, "acme", tfe.PolicySetCreateOptions{Name: tfe.String("global"), Kind: tfe.OPA, Global: tfe.Bool(true),
			WorkspaceExclusions: []*tfe.Workspace{ws["other"]}})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PolicySets.AddProjectExclusions(ctx, global.ID, tfe.PolicySetAddProjectExclusionsOptions{ProjectExclusions: []*tfe.Project{prj}}); err != nil {
			t.Fatal(err)
		}
		check("a global set", map[string]bool{"plain": true, "inproject": false, "excluded": false, "other": false})

		p, err := c.PolicySetParameters.Create(ctx, global.ID, tfe.PolicySetParameterCreateOptions{Key: tfe.String("token"),
			Value: tfe.String("s3cr3t-value"), Category: tfe.Category(tfe.CategoryPolicySet), Sensitive: tfe.Bool(true)})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.PolicySetParameters.Read(ctx, global.ID, p.ID); err != nil || p.Value != "" || got.Value != "" || !got.Sensitive {
			t.Fatalf("a sensitive parameter came back as %+v / %+v (%v)", p, got, err)
		}
		var raw string
		if err := e.Server.DB.QueryRow(ctx, `SELECT value FROM policy_set_parameters WHERE id = ?`, p.ID).Scan(&raw); err != nil || raw == "s3cr3t-value" {
			t.Fatalf("the parameter is stored as %q (%v), want it sealed", raw, err)
		}
	})
}

// TestSetLists: the store filters and pages policy sets and policies, a
// name's "_" is itself, and each listed set carries its policies and
// scopes.
func TestSetLists(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "payments"})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		pol, err := c.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String("p_1"), Kind: tfe.OPA, Query: tfe.String("data.terraform.main.deny"),
			EnforcementLevel: tfe.EnforcementMode(tfe.EnforcementAdvisory)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Policies.Create(ctx, "acme", tfe.PolicyCreateOptions{Name: tfe.String("px1"), Kind: tfe.OPA, Query: tfe.String("data.terraform.main.deny"),
			EnforcementLevel: tfe.EnforcementMode(tfe.EnforcementAdvisory)}); err != nil {
			t.Fatal(err)
		}
		for _, o := range []tfe.PolicySetCreateOptions{
			{Name: tfe.String("a_set"), Kind: tfe.OPA, Workspaces: []*tfe.Workspace{ws}, Policies: []*tfe.Policy{pol}},
			{Name: tfe.String("axset"), Kind: tfe.OPA, Projects: []*tfe.Project{prj}},
			{Name: tfe.String("global"), Kind: tfe.OPA, Global: tfe.Bool(true), WorkspaceExclusions: []*tfe.Workspace{ws}},
		} {
			if _, err := c.PolicySets.Create(ctx, "acme", o); err != nil {
				t.Fatal(err)
			}
		}
		names := func(l *tfe.PolicySetList) string {
			var out []string
			for _, s := range l.Items {
				out = append(out, s.Name)
			}
			return strings.Join(out, ",")
		}
		for _, tc := range []struct {
			opts        *tfe.PolicySetListOptions
			want        string
			total, page int
		}{
			{nil, "a_set,axset,global", 3, 1},
			{&tfe.PolicySetListOptions{Search: "A_S"}, "a_set", 1, 1},
			{&tfe.PolicySetListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 2}}, "global", 3, 2},
			{&tfe.PolicySetListOptions{Kind: tfe.Sentinel}, "", 0, 1},
		} {
			l, err := c.PolicySets.List(ctx, "acme", tc.opts)
			if err != nil || names(l) != tc.want || l.TotalCount != tc.total || l.CurrentPage != tc.page {
				t.Errorf("policy sets %+v: %q of %d on page %d (%v), want %q of %d on page %d", tc.opts, names(l), l.TotalCount, l.CurrentPage, err, tc.want, tc.total, tc.page)
			}
		}
		l, err := c.PolicySets.List(ctx, "acme", nil)
		if err != nil || len(l.Items) != 3 {
			t.Fatalf("policy sets: %v", err)
		}
		a, x, g := l.Items[0], l.Items[1], l.Items[2]
		if len(a.Workspaces) != 1 || a.Workspaces[0].ID != ws.ID || len(a.Policies) != 1 || a.Policies[0].ID != pol.ID ||
			len(x.Projects) != 1 || x.Projects[0].ID != prj.ID || len(x.Workspaces) != 0 ||
			len(g.WorkspaceExclusions) != 1 || g.WorkspaceExclusions[0].ID != ws.ID {
			t.Errorf("the listed sets' relations: a_set %d workspaces, %d policies; axset %d projects; global %d exclusions",
				len(a.Workspaces), len(a.Policies), len(x.Projects), len(g.WorkspaceExclusions))
		}
		ps, err := c.Policies.List(ctx, "acme", &tfe.PolicyListOptions{Search: "P_1"})
		if err != nil || len(ps.Items) != 1 || ps.Items[0].ID != pol.ID || ps.TotalCount != 1 {
			t.Errorf("policies q=P_1: %+v %v, want p_1 alone", ps, err)
		}
		ps, err = c.Policies.List(ctx, "acme", &tfe.PolicyListOptions{ListOptions: tfe.ListOptions{PageNumber: 2, PageSize: 1}})
		if err != nil || len(ps.Items) != 1 || ps.Items[0].Name != "px1" || ps.TotalCount != 2 {
			t.Errorf("policies page 2 of 1: %+v %v, want px1 of 2", ps, err)
		}
	})
}
