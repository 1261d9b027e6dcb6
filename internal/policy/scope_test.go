package policy_test

import (
	"context"
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
