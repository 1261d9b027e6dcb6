package authz

import (
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
)

// AgentJobs is every call of the job protocol (internal/jobapi): claim,
// heartbeat, inputs, logs, results and state. The resource names the
// job's agent pool ("" for jobs of the server's own runner).
const AgentJobs Action = "agent:jobs"

// agentDecision is the rule of the job protocol and of agent tokens: an
// agent token reaches the jobs of its own pool and nothing else (no
// /api/v2 route); the server's in-process runner reaches the jobs of no
// pool; no other caller speaks the job protocol.
func agentDecision(p *auth.Principal, action Action, res Resource) error {
	if action != AgentJobs {
		return core.Forbidden("%s can only be used by an agent for the job protocol", p.Kind.Token())
	}
	switch p.Kind {
	case auth.KindAgent:
		if p.AgentPoolID != "" && p.AgentPoolID == res.AgentPoolID {
			return nil
		}
		return core.NotFound("job not found")
	case auth.KindRunner:
		if res.AgentPoolID == "" {
			return nil
		}
		return core.NotFound("job not found")
	}
	return core.Forbidden("only agent tokens may use the job protocol")
}
