package ui

import (
	"testing"

	"github.com/terracehq/terrace/internal/run"
)

// applyView hides an apply that will never run whichever of the run's
// and the apply's status says so, and shows one that ran or may run.
func TestApplyView(t *testing.T) {
	for _, tc := range []struct {
		status run.Status
		apply  run.PhaseStatus
		logged bool
		want   string
	}{
		{run.Planned, run.PhasePending, false, "log"},
		{run.Applying, run.PhaseRunning, true, "log"},
		{run.Applied, run.PhaseFinished, true, "log"},
		{run.Errored, run.PhaseErrored, true, "log"},
		{run.Errored, run.PhasePending, false, "skipped"},
		{run.Discarded, run.PhasePending, false, "skipped"},
		{run.Canceled, run.PhasePending, false, "skipped"},
		{run.PlannedAndFinished, run.PhasePending, false, "skipped"},
		{run.Discarded, run.PhaseUnreachable, false, "skipped"},
		{run.Planned, run.PhaseUnreachable, false, "skipped"},
	} {
		rn := &run.Run{Status: tc.status, Apply: run.Phase{Status: tc.apply}}
		if got := applyView(rn, tc.logged); got != tc.want {
			t.Errorf("run %s, apply %s, logged %v: %q, want %q", tc.status, tc.apply, tc.logged, got, tc.want)
		}
	}
	if got := applyView(&run.Run{PlanOnly: true, Status: run.Planning}, false); got != "" {
		t.Errorf("a plan-only run: %q, want nothing", got)
	}
}
