package stack_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestLinkedStacks: a stack publishes a deployment's output with
// publish_output; another stack of the project reads it with
// upstream_input. Before anything is published the reader's deployment
// fails with a diagnostic naming its file and line; once the upstream
// publishes, and again when the published value changes, the reader gets
// a new configuration by itself and its deployment applies with the value.
// A value published from a sensitive output stays sensitive downstream.
func TestLinkedStacks(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		org, prj, net := newStack(t, e, "linked", "net", "")
		app, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "app", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		appDir := copyDir(t, "testdata/linked/app")
		rewrite(t, filepath.Join(appDir, "deployments.tfdeploy.hcl"), "/ORG/", "/"+org.Name+"/")

		// Nothing published yet: the reader cannot plan.
		a1, err := c.StackConfigurations.CreateAndUpload(ctx, app.ID, appDir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := waitRun(t, c, groupRun(t, c, a1.ID, "auto").ID, is("succeeded", "failed")); r.Status != "failed" {
			t.Fatalf("the reader's first run = %s, want failed: nothing is published yet", r.Status)
		}
		if d := diagnostics(t, c, a1.ID); !strings.Contains(d, "deployments.tfdeploy.hcl:19") || !strings.Contains(d, "net_id") {
			t.Errorf("diagnostics = %s, want the missing upstream value named with its file and line", d)
		}

		// The upstream publishes, then changes the value: each time the
		// reader gets a configuration of its own and deploys with it.
		netDir := copyDir(t, "testdata/linked/net")
		for i, version := range []string{"v1", "v2"} {
			if i > 0 {
				rewrite(t, filepath.Join(netDir, "deployments.tfdeploy.hcl"), `name = "v1"`, `name = "`+version+`"`)
			}
			n, err := c.StackConfigurations.CreateAndUpload(ctx, net.ID, netDir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if r := waitRun(t, c, groupRun(t, c, n.ID, "auto").ID, is("succeeded", "failed")); r.Status != "succeeded" {
				t.Fatalf("net %s = %s: %s", version, r.Status, diagnostics(t, c, n.ID))
			}
			a := waitConfigurations(t, c, app.ID, i+2)
			if r := waitRun(t, c, groupRun(t, c, a.ID, "auto").ID, is("succeeded", "failed")); r.Status != "succeeded" {
				t.Fatalf("the reader after net published %s = %s: %s", version, r.Status, diagnostics(t, c, a.ID))
			}
			if got := outputs(t, c, org.Name, "stack-"+app.ID+"-prod")["app"]; got != "app-on-"+version+"-net" {
				t.Errorf("app output after net published %s = %v", version, got)
			}
		}
		// The published values are sealed at rest.
		vals, err := store.All(ctx, e.Server.DB, func(sc store.Scanner) (string, error) {
			var v string
			return v, sc.Scan(&v)
		}, `SELECT value FROM stack_published_outputs`)
		if err != nil || len(vals) == 0 {
			t.Fatalf("published outputs: %q, %v", vals, err)
		}
		for _, v := range vals {
			if !strings.HasPrefix(v, "tsl1.") || strings.Contains(v, "-net") {
				t.Errorf("a published output is stored in plain text: %q", v)
			}
		}
		// A value published from a sensitive output stays sensitive: the
		// reader takes it into a sensitive variable, which its runs hide.
		var secretSensitive, idSensitive bool
		if err := e.Server.DB.QueryRow(ctx, `SELECT (SELECT sensitive FROM stack_published_outputs WHERE name = 'net_secret'), (SELECT sensitive FROM stack_published_outputs WHERE name = 'net_id')`).
			Scan(&secretSensitive, &idSensitive); err != nil || !secretSensitive || idSensitive {
			t.Errorf("published sensitivity: net_secret %v, net_id %v (%v)", secretSensitive, idSensitive, err)
		}
		for _, r := range workspaceRuns(t, c, org.Name, "stack-"+app.ID+"-prod") {
			for _, v := range r.Variables {
				if v.Key == "net_secret" && v.Value != "" {
					t.Errorf("run %s shows the upstream secret: %q", r.ID, v.Value)
				}
			}
		}
	})
}

// waitConfigurations waits until a stack has n configurations and returns
// the newest once it completed.
func waitConfigurations(t *testing.T, c *tfe.Client, stackID string, n int) *tfe.StackConfiguration {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		l, err := c.StackConfigurations.List(context.Background(), stackID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) >= n && l.Items[0].Status == tfe.StackConfigurationStatusCompleted {
			if len(l.Items) != n {
				t.Fatalf("stack %s has %d configurations, want %d", stackID, len(l.Items), n)
			}
			return l.Items[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack %s has %d configurations, want %d completed", stackID, len(l.Items), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
