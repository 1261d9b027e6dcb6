package runtask

import (
	"context"

	"github.com/terracehq/terrace/internal/store"
)

// PolicyChecks is the policy domain (internal/policy) as task stages see
// it: a run on a workspace with policy sets gets a post-plan stage (with or
// without tasks) whose policy evaluations end with its results.
type PolicyChecks interface {
	// Applies reports whether runs on the workspace get policy
	// evaluations after their plan; projectID is the workspace's project
	// when the caller knows it ("": it is read).
	Applies(ctx context.Context, q store.Q, org, workspaceID, projectID string) (bool, error)
	// Prepare creates the pending policy evaluations of a new run's
	// post-plan stage (in the run's transaction).
	Prepare(ctx context.Context, q store.Q, stageID, runID, org, workspaceID string) error
	// Evaluate runs the pending evaluations of a running stage; a repeated
	// or concurrent call does nothing.
	Evaluate(ctx context.Context, stageID string) error
	// Verdict tells whether the stage's evaluations have ended and what,
	// if anything, they block.
	Verdict(ctx context.Context, q store.Q, stageID string) (PolicyVerdict, error)
	// Ended records how the stage ended: overridden marks its failed
	// evaluations overridden, otherwise unfinished ones are canceled.
	Ended(ctx context.Context, q store.Q, stageID string, overridden bool) error
	// EvaluationIDs and Evaluations render a stage's evaluations (the
	// policy-evaluations relationship and include).
	EvaluationIDs(ctx context.Context, stageID string) ([]string, error)
	Evaluations(ctx context.Context, stageID string) ([]any, error)
}

// PolicyVerdict is what a stage's policy evaluations decided.
type PolicyVerdict struct {
	// Done: every evaluation of the stage is final (or it has none).
	Done bool
	// Blocking names the mandatory failures and errors.
	Blocking []string
	// Overridable: every blocking failure may be overridden.
	Overridable bool
}

func (s *Service) policyVerdict(ctx context.Context, q store.Q, stageID string) (PolicyVerdict, error) {
	if s.o.Policies == nil {
		return PolicyVerdict{Done: true, Overridable: true}, nil
	}
	return s.o.Policies.Verdict(ctx, q, stageID)
}

// SetPolicies puts policy evaluations into post-plan stages (before Run).
func (s *Service) SetPolicies(p PolicyChecks) { s.o.Policies = p }
