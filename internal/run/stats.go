package run

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// StatusCounts counts the runs in each status, over every organization,
// in one query (metrics read it at scrape time, so every replica reports
// the same store-wide figure).
func (s *Service) StatusCounts(ctx context.Context) (map[Status]int, error) {
	rows, err := s.DB.Query(ctx, `SELECT status, COUNT(*) FROM runs GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[Status]int{}
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		out[Status(st)] = n
	}
	return out, rows.Err()
}

// QueueDepth is the job queue of one phase: how many jobs wait for a
// runner and since when the oldest has waited.
type QueueDepth struct {
	Queued int
	Oldest time.Time // zero when none waits
}

// QueueStats returns the job queue by phase ("plan", "apply"): the jobs
// waiting to be claimed, in one query.
func (s *Service) QueueStats(ctx context.Context) (map[string]QueueDepth, error) {
	rows, err := s.DB.Query(ctx, `SELECT phase, COUNT(*), MIN(created_at) FROM jobs WHERE status = 'queued' GROUP BY phase`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]QueueDepth{}
	for rows.Next() {
		var phase string
		var n int
		var oldest int64
		if err := rows.Scan(&phase, &n, &oldest); err != nil {
			return nil, err
		}
		out[phase] = QueueDepth{Queued: n, Oldest: core.FromMicros(oldest)}
	}
	return out, rows.Err()
}
