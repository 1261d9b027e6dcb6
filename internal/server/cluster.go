package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
)

// wakeChannel is the one LISTEN/NOTIFY channel replicas wake each other
// on: a job or module test run was queued, a notification, run task
// request, fan-out or stack step became due. A wake-up only makes loops look at the store sooner;
// each keeps a slow poll as a safety net.
const wakeChannel = "terrace_wake"

// wireCluster makes the domains announce their wake-ups to every replica
// and registers the leadership gauge. Called by New once the services and
// metrics exist.
func (s *Server) wireCluster() error {
	s.bell = loops.NewBell(s.DB, wakeChannel, s.logger.With("component", "wake"))
	s.Runs.Wakes().Announce(s.bell.Ring)
	s.Notify.Wake().Announce(s.bell.Ring)
	s.RunTasks.Wake().Announce(s.bell.Ring)
	s.Triggers.Wake().Announce(s.bell.Ring)
	s.Stacks.Wake().Announce(s.bell.Ring)
	s.VCS.Queue().Wake().Announce(s.bell.Ring)
	s.ModuleTests.Wake().Announce(s.bell.Ring)
	s.Replica = s.instanceID()
	s.leaderGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_cluster_leader",
		Help: "1 while this replica (named by its instance ID) runs the loops that run once per cluster, else 0.",
	}, []string{"replica"})
	s.leaderGauge.WithLabelValues(s.Replica).Set(0)
	return s.Metrics.Registry().Register(s.leaderGauge)
}

// wakeLocal wakes this replica's loops after another replica announced
// work (or after a lapse in listening, when anything may have come).
func (s *Server) wakeLocal() {
	s.Runs.WakeLocal()
	s.Notify.Wake().Local()
	s.RunTasks.Wake().Local()
	s.Triggers.Wake().Local()
	s.Stacks.Wake().Local()
	s.VCS.Queue().Wake().Local()
	s.ModuleTests.WakeLocal()
}

// startLoops starts every background loop that is not a runner on one
// lifecycle (internal/loops): on every replica the wake-up bell and
// listener and the leadership campaign; on the leader only (a PostgreSQL
// advisory lock; SQLite always leads) the loops that must run once per
// cluster. stop ends them all and waits.
func (s *Server) startLoops(ctx context.Context) (stop func()) {
	logger := s.logger.With("component", "loops", "replica", s.Replica)
	g := loops.NewGroup(ctx, logger)
	g.Go("wake-bell", s.bell.Run)
	g.Go("replica-presence", s.keepPresence)
	// The site settings this replica keeps in memory (the rate limit):
	// another replica's change counts here once its wake-up arrives.
	g.Go("site-settings", func(ctx context.Context) { s.Settings.Watch(ctx, 0) })
	g.Go("wake-listener", func(ctx context.Context) {
		loops.Listen(ctx, s.DB, wakeChannel, 5*time.Second, logger, s.wakeLocal)
	})
	l := &loops.Leader{DB: s.DB, Replica: s.Replica, Logger: logger, OnChange: func(leading bool) {
		v := 0.0
		if leading {
			v = 1
		}
		s.leaderGauge.WithLabelValues(s.Replica).Set(v)
	}}
	// Claims name this process; claims of this data dir's earlier
	// processes are taken back at once, any other when it expires.
	claimant := func(kind string) (string, string) {
		prefix := kind + "-" + s.Replica + "-"
		return prefix + core.RandomString(10), prefix
	}
	l.Go("notification-delivery", func(ctx context.Context) {
		id, prefix := claimant("notify")
		s.Notify.Run(ctx, id, prefix)
	})
	l.Go("run-task-delivery", func(ctx context.Context) {
		id, prefix := claimant("runtask")
		s.RunTasks.Run(ctx, id, prefix)
	})
	l.Go("trigger-fan-out", func(ctx context.Context) {
		id, prefix := claimant("trigger")
		s.Triggers.Run(ctx, id, prefix)
	})
	l.Go("vcs", func(ctx context.Context) {
		id, prefix := claimant("vcs")
		s.VCS.Run(ctx, id, prefix)
	})
	l.Go("stack-runs", func(ctx context.Context) { s.Stacks.Run(ctx, 500*time.Millisecond) })
	l.Go("job-reaper", s.reapExpiredJobs)
	l.Go("blob-sweep", func(ctx context.Context) {
		blob.RunAll(ctx, time.Minute, s.ConfigVersions.Ledger(), s.Registry.Ledger(), s.Providers.Ledger(), s.Runs.Ledger(), s.Stacks.Ledger())
	})
	l.Go("audit-prune", s.Audit.Run)
	l.Go("state-garbage", func(ctx context.Context) { s.States.RunGarbageCollector(ctx, 10*time.Minute) })
	l.Go("data-retention", func(ctx context.Context) { s.Retention.Run(ctx, time.Minute, time.Hour) })
	if s.cfg.AssessmentInterval >= 0 { // negative: assessments only on request
		tick := min(max(s.cfg.AssessmentInterval/10, 10*time.Millisecond), time.Minute)
		l.Go("assessment-scheduler", func(ctx context.Context) { s.Assessments.Run(ctx, tick) })
	}
	s.Leader = l
	g.Go("leader", l.Run)
	return g.Stop
}

// reapExpiredJobs fails or re-queues the jobs whose runners stopped
// heartbeating (a replica that died, an agent gone): within the heartbeat
// timeout and a fifth of it (at most every 5s).
func (s *Server) reapExpiredJobs(ctx context.Context) {
	t := time.NewTicker(min(5*time.Second, max(s.Runs.LeaseTTL/5, 10*time.Millisecond)))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n, err := s.Runs.ReapExpired(ctx, "", ""); err != nil && ctx.Err() == nil {
				s.logger.Error("reaping expired jobs", "error", err)
			} else if n > 0 {
				s.logger.Warn("reaped jobs whose runners stopped heartbeating", "jobs", n)
			}
		}
	}
}
