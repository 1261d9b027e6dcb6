package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAgentCount: go-tfe's AgentPool.AgentCount counts what HCP Terraform
// documents for agent-count: agents idle, busy or unknown (silent); an
// exited or errored agent is left out.
func TestAgentCount(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		pool := acmePool(ctx, t, e)
		svc := e.Server.AgentPools
		ids := map[string]string{}
		for _, status := range []string{agent.StatusIdle, agent.StatusBusy, agent.StatusExited, agent.StatusErrored, agent.StatusUnknown} {
			id, err := svc.Register(ctx, pool.ID, status, "127.0.0.1")
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = status
			switch status {
			case agent.StatusUnknown:
				// Busy, then silent for longer than the heartbeat timeout.
				if err := svc.SetStatus(ctx, id, agent.StatusBusy); err != nil {
					t.Fatal(err)
				}
				old := core.Micros(core.Now().Add(-time.Hour))
				if _, err := e.Server.DB.Exec(ctx, `UPDATE agents SET last_ping_at = ? WHERE id = ?`, old, id); err != nil {
					t.Fatal(err)
				}
			case agent.StatusIdle:
			default:
				if err := svc.SetStatus(ctx, id, status); err != nil {
					t.Fatal(err)
				}
			}
		}
		list, err := e.Client.Agents.List(ctx, pool.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != len(ids) {
			t.Fatalf("the pool lists %d agents, want %d", len(list.Items), len(ids))
		}
		for _, a := range list.Items {
			if a.Status != ids[a.ID] {
				t.Errorf("agent %s reads %s, want %s", a.Name, a.Status, ids[a.ID])
			}
		}
		p, err := e.Client.AgentPools.Read(ctx, pool.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p.AgentCount != 3 {
			t.Fatalf("agent-count is %d, want 3 (idle, busy and unknown; not exited or errored)", p.AgentCount)
		}
	})
}
