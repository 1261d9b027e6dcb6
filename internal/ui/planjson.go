package ui

import (
	"context"

	"github.com/terracehq/terrace/internal/run"
)

// redactedPlan returns a run's redacted plan JSON for its page. An
// auto-applied run's JSON is made after the run is applied (run.PlanJSON):
// the page that reloads when the apply's log ends waits for it then,
// not while the run applies (that wait could last the whole apply).
func (u *UI) redactedPlan(ctx context.Context, rn *run.Run) ([]byte, error) {
	if rn.PlanJSONLater && rn.Status.Final() {
		return u.o.Runs.PlanJSON(ctx, rn, "json-redacted")
	}
	return u.o.Runs.PlanBlob(ctx, rn.Plan.ID, "json-redacted")
}
