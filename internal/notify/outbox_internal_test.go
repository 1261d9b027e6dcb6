package notify

import (
	"testing"

	"github.com/terracehq/terrace/internal/run"
)

func TestTriggerOf(t *testing.T) {
	resting := &run.Run{Status: run.Planned}
	moved := &run.Run{Status: run.Applying}
	cases := []struct {
		r        *run.Run
		from, to run.Status
		want     Trigger
	}{
		{moved, "", run.Pending, RunCreated},
		{moved, run.PlanQueued, run.Planning, RunPlanning},
		{resting, run.Planning, run.Planned, RunNeedsAttention},
		{moved, run.Planning, run.Planned, ""}, // auto-apply passes through planned
		{moved, run.ApplyQueued, run.Applying, RunApplying},
		{moved, run.Applying, run.Applied, RunCompleted},
		{moved, run.Planning, run.PlannedAndFinished, RunCompleted},
		{moved, run.Planning, run.Errored, RunErrored},
		{moved, run.Planning, run.Canceled, RunErrored},
		{moved, run.PlanQueued, run.Discarded, ""},
		{&run.Run{PlanOnly: true}, run.Planning, run.PlannedAndFinished, ""},
	}
	for _, c := range cases {
		got, _, _ := triggerOf(run.Transition{Run: c.r, From: c.from, To: c.to})
		if got != c.want {
			t.Errorf("%s -> %s (run %s): %q, want %q", c.from, c.to, c.r.Status, got, c.want)
		}
	}
}
