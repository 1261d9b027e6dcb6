package agent_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRunJobsGoToServingPool: a run's job is queued for its workspace's
// agent pool when the pool serves the workspace, and for no agent (its
// event saying why) when the pool does not. The pool is read inside the
// transaction that queues the job (run with TERRACE_STORE_TXGUARD=1 this
// fails if it took a second connection).
func TestRunJobsGoToServingPool(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		pool := acmePool(ctx, t, e)
		runs := map[string]*tfe.Run{}
		var served *tfe.Workspace
		for _, name := range []string{"served", "other"} {
			ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String(name),
				ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
			if err != nil {
				t.Fatal(err)
			}
			if name == "served" {
				served = ws
			}
			cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)
			runs[name] = &tfe.Run{Workspace: ws, ConfigurationVersion: cv}
		}
		if _, err := e.Client.AgentPools.Update(ctx, pool.ID, tfe.AgentPoolUpdateOptions{OrganizationScoped: tfe.Bool(false),
			AllowedWorkspaces: []*tfe.Workspace{served}}); err != nil {
			t.Fatal(err)
		}
		for name, r := range runs {
			created, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: r.Workspace, ConfigurationVersion: r.ConfigurationVersion})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			runs[name] = created
		}
		for name, want := range map[string]struct{ pool, event string }{
			"served": {pool.ID, "waiting for an agent of pool private: "},
			"other":  {run.NoPool, "of pool private (which does not serve this workspace"},
		} {
			var got string
			if err := e.Server.DB.QueryRow(ctx, `SELECT agent_pool_id FROM jobs WHERE run_id = ?`, runs[name].ID).Scan(&got); err != nil {
				t.Fatalf("%s: the run's job: %v", name, err)
			}
			if got != want.pool {
				t.Errorf("%s: the job is queued for pool %q, want %q", name, got, want.pool)
			}
			events, err := e.Client.RunEvents.List(ctx, runs[name].ID, nil)
			if err != nil {
				t.Fatal(err)
			}
			found := false
			for _, ev := range events.Items {
				found = found || strings.Contains(ev.Description, want.event)
			}
			if !found {
				t.Errorf("%s: no run event says %q: %+v", name, want.event, events.Items)
			}
		}
	})
}

// TestSystemQueuedJobKeepsInheritedPool: a job queued by the server for
// no caller (the next run started after a lease expired, say) goes to the
// agent pool the workspace inherits from its project, as one queued for a
// user does; it must never fall to the server's own runner.
func TestSystemQueuedJobKeepsInheritedPool(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		pool := acmePool(ctx, t, e)
		prj, err := e.Client.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "on-agents",
			DefaultExecutionMode: tfe.String("agent"), DefaultAgentPoolID: tfe.String(pool.ID)})
		if err != nil {
			t.Fatal(err)
		}
		ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app"), Project: prj})
		if err != nil {
			t.Fatal(err)
		}
		cv := testenv.UploadConfig(ctx, t, e.Client, ws.ID, `resource "terraform_data" "x" {}`)
		if _, err := e.Client.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
			t.Fatal(err)
		}
		r, err := e.Client.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
		if err != nil {
			t.Fatal(err)
		}
		// The lock goes without a caller's unlock; the server starts the
		// pending run for no caller.
		if _, err := e.Server.DB.Exec(ctx, `UPDATE workspaces SET locked_by_kind = '', locked_by_id = '', lock_reason = '' WHERE id = ?`, ws.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.Server.Runs.Schedule(ctx, ws.ID); err != nil {
			t.Fatal(err)
		}
		var got string
		if err := e.Server.DB.QueryRow(ctx, `SELECT agent_pool_id FROM jobs WHERE run_id = ?`, r.ID).Scan(&got); err != nil {
			t.Fatalf("the run's job: %v", err)
		}
		if got != pool.ID {
			t.Fatalf("a job queued for no caller went to pool %q, want the project's %q", got, pool.ID)
		}
	})
}

// acmePool makes organization acme with an agent pool named private.
func acmePool(ctx context.Context, t *testing.T, e *testenv.Env) *tfe.AgentPool {
	t.Helper()
	testenv.NewOrg(t, e.Client, "acme")
	pool, err := e.Client.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("private")})
	if err != nil {
		t.Fatal(err)
	}
	return pool
}
