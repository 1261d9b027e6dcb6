package run

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/store"
)

// What FinishPlan and FinishApply share: a runner reports a phase on the
// run's critical path (POST to applied), so the report reads the job's
// run in one query, stores what is independent (blobs, the folded log,
// the new state) side by side, and then records the outcome in one
// transaction. Each step's time is logged at debug level.

// runOfJob reads the run of a job in one query; nil (and no error) when
// the job no longer exists (force-canceled meanwhile).
func (s *Service) runOfJob(ctx context.Context, jobID string) (*Run, error) {
	r, err := scanRunWith(s.Keys)(s.DB.QueryRow(ctx, `SELECT r.doc, r.variables FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = ?`, jobID))
	if store.IsNoRows(err) {
		return nil, nil
	}
	return r, err
}

// reported is called by a runner's report of run r once it has read the
// run, before it stores anything (a seam for tests: onReport).
func (s *Service) reported() {
	if s.onReport != nil {
		s.onReport()
	}
}

// dropIfDeleted deletes every blob run r may have when the report that
// stored some of them failed (err) because the run no longer exists: its
// workspace was deleted after the report read the run, and the deletion's
// ledger (run_garbage) may have been swept before these blobs were
// written. A run that still exists keeps its blobs, whatever err was.
func (s *Service) dropIfDeleted(ctx context.Context, r *Run, err error) {
	if err == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	var n int
	if qerr := s.DB.QueryRow(ctx, `SELECT COUNT(*) FROM runs WHERE id = ?`, r.ID).Scan(&n); qerr != nil || n > 0 {
		return
	}
	for _, k := range runBlobs(r.Plan.ID, r.Apply.ID) {
		if derr := s.Blobs.Delete(ctx, k); derr != nil {
			s.Logger.WarnContext(ctx, "deleting a blob of a deleted run", "run", r.ID, "key", k, "error", derr)
		}
	}
}

// together runs fns at once and waits for all of them; the error joins
// theirs. The work they do must not depend on each other.
func together(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i+1] = fn()
		}()
	}
	errs[0] = fns[0]()
	wg.Wait()
	return errors.Join(errs...)
}

// stepTimer collects how long a report's steps took, for one debug line.
type stepTimer struct {
	mu    sync.Mutex
	attrs []any
}

// time returns a function that records the time since now under step.
func (t *stepTimer) time(step string) func() {
	start := time.Now()
	return func() {
		d := time.Since(start)
		t.mu.Lock()
		t.attrs = append(t.attrs, step+"_ms", float64(d.Microseconds())/1000)
		t.mu.Unlock()
	}
}

func (s *Service) logSteps(what, runID string, t *stepTimer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s.Logger.Debug(what, append([]any{"run", runID}, t.attrs...)...)
}
