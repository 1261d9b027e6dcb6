package workspace_test

import (
	"context"
	"strings"
	"testing"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestPoolDeletedBesideAssignment: a workspace given an agent pool while
// the pool's delete is committing is refused (the pool is unknown), never
// left naming a deleted pool whose runs no agent takes. The delete is held
// open beside the update (storetest.Beside): before (2026-11-30) the update
// checked the pool before its transaction and wrote it, on both stores.
func TestPoolDeletedBesideAssignment(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		c := e.Client
		newOrg(t, c, "acme")
		pool, err := c.AgentPools.Create(ctx, "acme", tfe.AgentPoolCreateOptions{Name: tfe.String("pool")})
		if err != nil {
			t.Fatal(err)
		}
		w, err := c.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("app")})
		if err != nil {
			t.Fatal(err)
		}
		err = storetest.Beside(t, e.Server.DB, storetest.Statements(
			[]any{`DELETE FROM agent_pools WHERE id = ?`, pool.ID},
		), func() error {
			_, err := c.Workspaces.UpdateByID(ctx, w.ID, tfe.WorkspaceUpdateOptions{ExecutionMode: tfe.String("agent"), AgentPoolID: tfe.String(pool.ID)})
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "not found") {
			t.Errorf("assigning a pool deleted beside: %v, want it refused as not found", err)
		}
		var attrs string
		if err := e.Server.DB.QueryRow(ctx, `SELECT attrs FROM workspaces WHERE id = ?`, w.ID).Scan(&attrs); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(attrs, pool.ID) {
			t.Errorf("the workspace names the deleted pool: %s", attrs)
		}
	})
}
