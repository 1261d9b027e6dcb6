package assessment

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Run starts due assessments every tick until ctx ends: one loop per
// server, started from the server's context. A workspace is due when
// assessments are enabled for it and its last assessment (any outcome)
// started at least Interval ago, or it has none.
func (s *Service) Run(ctx context.Context, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		if err := s.StartDue(ctx); err != nil && ctx.Err() == nil {
			s.o.Logger.Error("scheduling health assessments", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// StartDue queues an assessment for every due workspace. A workspace that
// cannot be assessed (no configuration uploaded, local or agent execution)
// is skipped quietly and looked at again next tick.
func (s *Service) StartDue(ctx context.Context) error {
	ws, err := s.o.Workspaces.Enabled(ctx)
	if err != nil {
		return err
	}
	cutoff := core.Micros(core.Now().Add(-s.o.Interval))
	for _, w := range ws {
		if ctx.Err() != nil {
			return nil
		}
		var n int
		if err := s.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM assessment_results WHERE workspace_id = ? AND (status = ? OR created_at > ?)`,
			w.ID, string(Queued), cutoff).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			continue
		}
		if _, err := s.queue(ctx, w); err != nil {
			kind := core.KindOf(err)
			if kind == core.KindConflict || kind == core.KindNotFound {
				s.o.Logger.Debug("not assessing a workspace", "workspace", w.ID, "reason", err)
				continue
			}
			return err
		}
	}
	return nil
}
