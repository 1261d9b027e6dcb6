package authz_test

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
)

// TestAgentJobsReachOnlyTheirPool: an agent token reaches the jobs of its
// own pool and nothing else (no other pool's jobs, no /api/v2 action); the
// server's own runner reaches only jobs of no pool; no other caller speaks
// the job protocol.
func TestAgentJobsReachOnlyTheirPool(t *testing.T) {
	t.Parallel()
	s := &authz.Service{}
	ctx := context.Background()
	agentA := &auth.Principal{Kind: auth.KindAgent, AgentPoolID: "apool-a", Organization: "acme"}
	runner := &auth.Principal{Kind: auth.KindRunner}
	owner := &auth.Principal{Kind: auth.KindUser, UserID: "user-1", SiteAdmin: true}
	cases := []struct {
		name   string
		p      *auth.Principal
		action authz.Action
		res    authz.Resource
		want   core.Kind // 0: allowed
	}{
		{"agent, own pool", agentA, authz.AgentJobs, authz.Resource{Organization: "acme", AgentPoolID: "apool-a"}, 0},
		{"agent, other pool", agentA, authz.AgentJobs, authz.Resource{Organization: "acme", AgentPoolID: "apool-b"}, core.KindNotFound},
		{"agent, server runner's jobs", agentA, authz.AgentJobs, authz.Resource{Organization: "acme"}, core.KindNotFound},
		{"agent, an API action", agentA, authz.OrgRead, authz.Resource{Organization: "acme"}, core.KindForbidden},
		{"runner, no pool", runner, authz.AgentJobs, authz.Resource{}, 0},
		{"runner, a pool's job", runner, authz.AgentJobs, authz.Resource{AgentPoolID: "apool-a"}, core.KindNotFound},
		{"site admin, job protocol", owner, authz.AgentJobs, authz.Resource{AgentPoolID: "apool-a"}, core.KindForbidden},
	}
	for _, c := range cases {
		err := s.Decide(ctx, c.p, c.action, c.res)
		if c.want == 0 {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if err == nil || core.KindOf(err) != c.want {
			t.Errorf("%s: got %v, want kind %v", c.name, err, c.want)
		}
	}
}
