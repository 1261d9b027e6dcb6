package e2e

import (
	"bytes"
	"context"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestDeletionLeavesNoBlobs: deleting a workspace, and deleting an
// organization with a workspace, a module version and a stack in it,
// leaves nothing of them in the blob store once the sweeps have run. A
// deleted workspace kept its runs' logs and plans before, and a deleted
// organization everything: configuration archives, state versions,
// logs, plans, module archives, stack configurations.
func TestDeletionLeavesNoBlobs(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		kinds := func(want ...string) {
			t.Helper()
			files := blobFiles(t, e.Opts.DataDir)
			for _, k := range want {
				if !slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, k) }) {
					t.Fatalf("no %s blob to delete among %v: the test would prove nothing", k, files)
				}
			}
		}
		sweptEmpty := func(after string) {
			t.Helper()
			for _, g := range []blob.Garbage{e.Server.ConfigVersions.Ledger(), e.Server.Registry.Ledger(), e.Server.Runs.Ledger(), e.Server.Stacks.Ledger()} {
				if _, err := g.Sweep(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := e.Server.States.CollectGarbage(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if files := blobFiles(t, e.Opts.DataDir); len(files) > 0 {
				t.Errorf("after %s and the sweeps, the blob store still holds %v", after, files)
			}
		}

		r := applied(ctx, t, c, tfe.WorkspaceCreateOptions{Name: tfe.String("gone")}, netConfig)
		planJSON(ctx, t, c, r)
		kinds("configuration-versions/", "state-versions/", "logs/", "plans/")
		if err := c.Workspaces.DeleteByID(ctx, r.Workspace.ID); err != nil {
			t.Fatal(err)
		}
		sweptEmpty("deleting the workspace")

		r = applied(ctx, t, c, tfe.WorkspaceCreateOptions{Name: tfe.String("net")}, netConfig)
		planJSON(ctx, t, c, r)
		if _, err := c.RegistryModules.Create(ctx, "acme", tfe.RegistryModuleCreateOptions{Name: tfe.String("network"), Provider: tfe.String("aws")}); err != nil {
			t.Fatal(err)
		}
		rmv, err := c.RegistryModules.CreateVersion(ctx, tfe.RegistryModuleID{Organization: "acme", Name: "network", Provider: "aws", Namespace: "acme", RegistryName: tfe.PrivateRegistry},
			tfe.RegistryModuleCreateVersionOptions{Version: tfe.String("1.0.0")})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.RegistryModules.UploadTarGzip(ctx, rmv.Links["upload"].(string), bytes.NewReader(packModule(t, moduleCode("1.0.0")))); err != nil {
			t.Fatal(err)
		}
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "platform"})
		if err != nil {
			t.Fatal(err)
		}
		st, err := c.Stacks.Create(ctx, tfe.StackCreateOptions{Name: "twotier", Project: &tfe.Project{ID: prj.ID}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.StackConfigurations.CreateAndUpload(ctx, st.ID, "../stack/testdata/tfdata", nil); err != nil {
			t.Fatal(err)
		}
		kinds("configuration-versions/", "state-versions/", "logs/", "plans/", "registry-module-versions/", "stack-configurations/")
		if err := c.Organizations.Delete(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		sweptEmpty("deleting the organization")
	})
}

// planJSON waits for run r's plan JSON, which a run may store after it
// has applied, so that it is there to delete.
func planJSON(ctx context.Context, t *testing.T, c *tfe.Client, r *tfe.Run) {
	t.Helper()
	if _, err := c.Plans.ReadJSONOutput(ctx, r.Plan.ID); err != nil {
		t.Fatalf("the plan's JSON: %v", err)
	}
}

// blobFiles lists the blobs under a server's data dir (the default
// folder blob store), relative to it.
func blobFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	root := filepath.Join(dataDir, "blobs")
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out = append(out, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeletingAnApplyingWorkspace: a workspace deleted while its run
// applies takes the chunks of the running log with it (they stayed in
// the store for good before: the log is only folded and dropped when its
// phase reports, and the report of a deleted run records nothing).
func TestDeletingAnApplyingWorkspace(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: skipped with -short")
	}
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		ws, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("busy")})
		if err != nil {
			t.Fatal(err)
		}
		r := createRun(ctx, t, c, ws.ID, uploadConfig(ctx, t, c, ws.ID, `resource "terraform_data" "slow" {
  provisioner "local-exec" {
    command = "sleep 3"
  }
}
`).ID, nil)
		r = waitRun(ctx, t, c, r.ID, 2*time.Minute, tfe.RunApplying, tfe.RunApplied, tfe.RunErrored)
		if r.Status != tfe.RunApplying {
			t.Fatalf("the run is %s, not applying", r.Status)
		}
		chunks := func() int {
			t.Helper()
			var n int
			if err := e.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM log_chunks WHERE log_id = ?`, r.Apply.ID).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if chunks() == 0 {
			t.Fatal("the applying run's log has no chunks: the test would prove nothing")
		}
		if err := c.Workspaces.DeleteByID(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		if n := chunks(); n != 0 {
			t.Errorf("the deleted run's running log keeps %d chunks", n)
		}
	})
}
