package trigger

import (
	"context"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/store"
)

// The fan-out queue. When a run applies, the observer only inserts a row
// in trigger_fanouts (one short statement after the run's transaction);
// the fan-out loop claims due rows, queues the dependent runs and deletes
// the row. A server killed in between leaves the row, and the loop of the
// next process (or another replica, once the claim expires) does the
// fan-out. Lifecycle, one table:
//
//	pending ──claim──► claimed ──done──► (deleted)
//	   ▲                  │
//	   └── error: backoff ┤
//	   └── claim expired, or taken back at start-up
//	                      └── MaxFanOutAttempts errors ──► failed (kept, logged)
type fanStatus string

const (
	fanPending fanStatus = "pending"
	fanClaimed fanStatus = "claimed"
	fanFailed  fanStatus = "failed"
)

var fanMoves = map[fanStatus][]fanStatus{
	fanPending: {fanClaimed},
	fanClaimed: {fanPending, fanFailed},
}

// MaxFanOutAttempts ends retrying a fan-out that keeps failing.
const MaxFanOutAttempts = 10

// fanClaimTTL is how long a claim lasts before another process may take
// the fan-out back.
const fanClaimTTL = 5 * time.Minute

func moveFan(ctx context.Context, q store.Q, runID string, from, to fanStatus, set string, args ...any) (bool, error) {
	ok := false
	for _, s := range fanMoves[from] {
		ok = ok || s == to
	}
	if !ok {
		return false, fmt.Errorf("a fan-out cannot go from %s to %s", from, to)
	}
	query := `UPDATE trigger_fanouts SET status = ?, updated_at = ?`
	if set != "" {
		query += ", " + set
	}
	query += ` WHERE run_id = ? AND status = ?`
	all := append([]any{string(to), core.Micros(core.Now())}, args...)
	all = append(all, runID, string(from))
	res, err := q.Exec(ctx, query, all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// enqueueFanOut records that runID, a run of workspaceID, applied.
func (s *Service) enqueueFanOut(ctx context.Context, runID, workspaceID string) error {
	now := core.Micros(core.Now())
	_, err := s.o.DB.Exec(ctx, `INSERT INTO trigger_fanouts (run_id, workspace_id, status, next_attempt_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		runID, workspaceID, string(fanPending), now, now, now)
	if store.IsUniqueViolation(s.o.DB, err) {
		return nil // seen twice
	}
	if err == nil {
		s.nudge()
	}
	return err
}

// Run works the fan-out queue until ctx ends. claimant names this loop in
// claims; claims starting with lostPrefix (this data dir's earlier
// processes) are taken back at once.
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	if lostPrefix != "" {
		if _, err := s.o.DB.Exec(ctx, `UPDATE trigger_fanouts SET status = ?, claimed_by = '', next_attempt_at = ? WHERE status = ? AND claimed_by LIKE ? AND claimed_by <> ?`,
			string(fanPending), core.Micros(core.Now()), string(fanClaimed), lostPrefix+"%", claimant); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("taking back the fan-outs of an earlier process", "error", err)
		}
	}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		if err := s.work(ctx, claimant); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("working the fan-out queue", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-s.wake.C():
		case <-t.C:
		}
	}
}

type fanRow struct {
	runID, workspaceID string
	status             fanStatus
	attempts           int
}

// work claims and does every due fan-out, oldest first; failed ones are
// kept a week for operators, then pruned.
func (s *Service) work(ctx context.Context, claimant string) error {
	now := core.Now()
	if _, err := s.o.DB.Exec(ctx, `DELETE FROM trigger_fanouts WHERE status = ? AND updated_at < ?`, string(fanFailed), core.Micros(now.Add(-7*24*time.Hour))); err != nil {
		return err
	}
	rows, err := store.All(ctx, s.o.DB, func(sc interface{ Scan(...any) error }) (fanRow, error) {
		var r fanRow
		err := sc.Scan(&r.runID, &r.workspaceID, &r.status, &r.attempts)
		return r, err
	}, `SELECT run_id, workspace_id, status, attempts FROM trigger_fanouts WHERE status IN (?, ?) AND next_attempt_at <= ? AND created_at <= ? ORDER BY created_at, run_id LIMIT 100`,
		string(fanPending), string(fanClaimed), core.Micros(now), core.Micros(now.Add(-s.o.Hold)))
	if err != nil {
		return err
	}
	for _, r := range rows {
		if ctx.Err() != nil {
			return nil
		}
		if r.status == fanClaimed {
			// An expired claim goes back to pending first.
			if ok, err := moveFan(ctx, s.o.DB, r.runID, fanClaimed, fanPending, "claimed_by = ''"); err != nil || !ok {
				continue
			}
		}
		ok, err := moveFan(ctx, s.o.DB, r.runID, fanPending, fanClaimed, "claimed_by = ?, attempts = attempts + 1, next_attempt_at = ?",
			claimant, core.Micros(core.Now().Add(fanClaimTTL)))
		if err != nil || !ok {
			continue // another process took it
		}
		r.attempts++
		s.do(ctx, r)
	}
	return nil
}

// do runs one claimed fan-out and records the outcome.
func (s *Service) do(ctx context.Context, r fanRow) {
	src, err := s.o.Workspaces.System(ctx, r.workspaceID)
	if err == nil {
		err = s.fanOut(ctx, r.runID, src)
	}
	if ctx.Err() != nil {
		return // the claim is taken back after the restart
	}
	if core.KindOf(err) == core.KindNotFound {
		err = nil // the workspace is gone: nothing to fan out
	}
	if err == nil {
		_, err = s.o.DB.Exec(ctx, `DELETE FROM trigger_fanouts WHERE run_id = ?`, r.runID)
	} else if r.attempts >= MaxFanOutAttempts {
		s.o.Logger.Error("gave up queueing the dependent runs of an apply", "run", r.runID, "workspace", r.workspaceID, "attempts", r.attempts, "error", err)
		_, err = moveFan(ctx, s.o.DB, r.runID, fanClaimed, fanFailed, "last_error = ?", err.Error())
	} else {
		wait := min(time.Second<<min(r.attempts-1, 6), time.Minute)
		s.o.Logger.Warn("queueing the dependent runs of an apply failed; retrying", "run", r.runID, "in", wait, "error", err)
		_, err = moveFan(ctx, s.o.DB, r.runID, fanClaimed, fanPending, "claimed_by = '', last_error = ?, next_attempt_at = ?",
			err.Error(), core.Micros(core.Now().Add(wait)))
	}
	if err != nil && ctx.Err() == nil {
		s.o.Logger.Error("recording a fan-out", "run", r.runID, "error", err)
	}
}

// PendingFanOuts counts the fan-outs not yet done, for operators and tests.
func (s *Service) PendingFanOuts(ctx context.Context) (int, error) {
	var n int
	err := s.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM trigger_fanouts WHERE status IN (?, ?)`, string(fanPending), string(fanClaimed)).Scan(&n)
	return n, err
}

// Wake is the fan-out loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.wake }

func (s *Service) nudge() { s.wake.Signal() }
