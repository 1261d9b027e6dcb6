package agent_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPoolAssignedBesideDelete: whatever assigns an agent pool (a
// project's default, a stack in agent mode, a run task, the
// organization's default; workspaces: TestPoolDeletedBesideAssignment)
// while the pool's delete is committing is refused as not found, never
// left naming a deleted pool (whose runs no agent would take, or whose
// task requests would go out from the server instead). The delete is held
// open beside the assignment (storetest.Beside). Before (2026-11-30) each
// checked the pool before its transaction, or not at all (stacks), and
// wrote it: the assignment succeeded on both stores.
func TestPoolAssignedBesideDelete(t *testing.T) {
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(svc.Close)
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		testenv.NewOrg(t, c, "acme")
		prj, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "apps"})
		if err != nil {
			t.Fatal(err)
		}
		task, err := c.RunTasks.Create(ctx, "acme", tfe.RunTaskCreateOptions{Name: "scan", URL: svc.URL, Category: "task"})
		if err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			// assign gives the pool to its user; named reports whether
			// that user names the pool afterwards.
			assign func(pool string) error
			named  func(pool string) bool
		}{
			{"a project's default", func(pool string) error {
				_, err := c.Projects.Update(ctx, prj.ID, tfe.ProjectUpdateOptions{DefaultExecutionMode: tfe.String("agent"), DefaultAgentPoolID: tfe.String(pool)})
				return err
			}, func(pool string) bool { return rowNames(t, e, `SELECT attrs FROM projects WHERE id = ?`, prj.ID, pool) }},

			{"a new project's default", func(pool string) error {
				_, err := c.Projects.Create(ctx, "acme", tfe.ProjectCreateOptions{Name: "agents", DefaultExecutionMode: tfe.String("agent"), DefaultAgentPoolID: tfe.String(pool)})
				return err
			}, func(pool string) bool {
				return rowNames(t, e, `SELECT COALESCE(MAX(attrs), '') FROM projects WHERE name = ?`, "agents", pool)
			}},

			{"a stack", func(pool string) error {
				body := fmt.Sprintf(`{"data":{"type":"stacks","attributes":{"name":"net","execution-mode":"agent"},`+
					`"relationships":{"project":{"data":{"type":"projects","id":%q}},"agent-pool":{"data":{"type":"agent-pools","id":%q}}}}}`, prj.ID, pool)
				if code, out := e.API(t, "", "POST", "/api/v2/stacks", body); code != http.StatusCreated {
					return fmt.Errorf("%d %s", code, out)
				}
				return nil
			}, func(pool string) bool {
				return rowNames(t, e, `SELECT COALESCE(MAX(agent_pool_id), '') FROM stacks WHERE name = ?`, "net", pool)
			}},

			// A task given a pool is verified through the pool's agents
			// first; here the pool is set as it would have been, and a
			// later update (which keeps it) must not write it again.
			{"a run task", func(pool string) error {
				_, err := c.RunTasks.Update(ctx, task.ID, tfe.RunTaskUpdateOptions{Description: tfe.String("scans")})
				return err
			}, func(pool string) bool {
				return rowNames(t, e, `SELECT description FROM run_tasks WHERE id = ?`, task.ID, "scans")
			}},

			{"the organization's default", func(pool string) error {
				_, err := c.Organizations.Update(ctx, "acme", tfe.OrganizationUpdateOptions{DefaultExecutionMode: tfe.String("agent"),
					DefaultAgentPool: &tfe.AgentPool{ID: pool}})
				return err
			}, func(pool string) bool {
				return rowNames(t, e, `SELECT attrs FROM organizations WHERE name = ?`, "acme", pool)
			}},
		}
		for i, tc := range cases {
			pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String(fmt.Sprintf("pool-%d", i))})
			if err != nil {
				t.Fatal(err)
			}
			if tc.name == "a run task" {
				if _, err := e.Server.DB.Exec(ctx, `UPDATE run_tasks SET agent_pool_id = ? WHERE id = ?`, pool.ID, task.ID); err != nil {
					t.Fatal(err)
				}
			}
			err = storetest.Beside(t, e.Server.DB, storetest.Statements(
				[]any{`DELETE FROM agent_pools WHERE id = ?`, pool.ID},
			), func() error { return tc.assign(pool.ID) })
			if err == nil || !strings.Contains(err.Error(), pool.ID) || !strings.Contains(err.Error(), "not found") {
				t.Errorf("%s: assigning a pool deleted beside: %v, want it refused as not found", tc.name, err)
			}
			if tc.named(pool.ID) {
				t.Errorf("%s: written with the deleted pool", tc.name)
			}
		}
		// A stack took any agent-pool id (its deployments then failed at
		// their first run); another organization's pool is unknown.
		testenv.NewOrg(t, c, "beta")
		other, err := c.AgentPools.Create(ctx, "beta", tfe.AgentPoolCreateOptions{Name: tfe.String("theirs")})
		if err != nil {
			t.Fatal(err)
		}
		if err := cases[2].assign(other.ID); err == nil || !strings.Contains(err.Error(), "422") || !strings.Contains(err.Error(), other.ID) {
			t.Errorf("a stack given another organization's pool: %v, want a 422 naming it", err)
		}
	})
}

// rowNames reports whether the one text column query reads contains s.
func rowNames(t *testing.T, e *testenv.Env, query, arg, s string) bool {
	t.Helper()
	var got string
	if err := e.Server.DB.QueryRow(context.Background(), query, arg).Scan(&got); err != nil {
		t.Fatal(err)
	}
	return strings.Contains(got, s)
}
