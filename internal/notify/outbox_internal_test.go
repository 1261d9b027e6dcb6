package notify

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/run"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	s := &Service{o: Options{Backoff: time.Second, MaxBackoff: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := s.backoff(i + 1); got != w {
			t.Errorf("backoff after attempt %d = %s, want %s", i+1, got, w)
		}
	}
	if got := s.backoff(1000); got != 10*time.Second {
		t.Errorf("backoff after many attempts = %s", got)
	}
}

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

func TestMoveRefusesWhatTheTableLacks(t *testing.T) {
	if _, err := move(context.Background(), nil, "ncd-x", delivered, pending, ""); err == nil {
		t.Fatal("a delivered notification went back to pending")
	}
	if _, err := move(context.Background(), nil, "ncd-x", pending, delivered, ""); err == nil {
		t.Fatal("a notification was delivered without being sent")
	}
}
