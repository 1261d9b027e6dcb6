package testenv

import (
	"context"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"
)

// WaitRun polls run id until it reaches one of want, failing the test
// when it ends otherwise or is still on its way after four minutes.
func WaitRun(ctx context.Context, t testing.TB, c *tfe.Client, id string, want ...tfe.RunStatus) *tfe.Run {
	t.Helper()
	return WaitRunWithin(ctx, t, c, id, 4*time.Minute, want...)
}

// WaitRunWithin is WaitRun with its own time limit. A caller that wants
// to see how a run ended lists the final statuses it accepts.
func WaitRunWithin(ctx context.Context, t testing.TB, c *tfe.Client, id string, limit time.Duration, want ...tfe.RunStatus) *tfe.Run {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		r, err := c.Runs.Read(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if r.Status == w {
				return r
			}
		}
		switch r.Status {
		case tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded, tfe.RunPlannedAndFinished, tfe.RunApplied:
			t.Fatalf("run %s ended %s, want %v", id, r.Status, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after %s, want %v", id, r.Status, limit, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
