package server

import (
	"net/http"

	"github.com/terracehq/terrace/internal/metrics"
	"github.com/terracehq/terrace/internal/outbox"
)

// wireMetrics builds the server's metrics and subscribes them to the
// domains they follow (run transitions, notification deliveries, run
// task requests, every outbox topic, module test runs). Job
// claims are counted by the runner's API (startRunner).
func (s *Server) wireMetrics() error {
	var err error
	s.Metrics, err = metrics.New(metrics.Options{
		Access: metrics.Access(s.cfg.MetricsAccess), Token: s.cfg.MetricsToken, Auth: s.Auth,
		Store: s.Runs, Outbox: s.Notify, ModuleTests: s.ModuleTests, Logger: s.logger.With("component", "metrics"),
	})
	if err != nil {
		return err
	}
	s.Runs.Observe(s.Metrics.RunTransition)
	s.Notify.OnAttempt(s.Metrics.NotificationAttempt)
	s.RunTasks.OnAttempt(s.Metrics.RunTaskAttempt)
	s.ModuleTests.OnEnded = append(s.ModuleTests.OnEnded, s.Metrics.ModuleTestEnded)
	for _, q := range []*outbox.Queue{s.Notify.Outbox(), s.RunTasks.Outbox(), s.Triggers.Outbox(), s.VCS.Queue()} {
		q.OnAttempt(s.Metrics.OutboxAttempt)
	}
	return nil
}

// metricsRoutes registers /metrics and /debug/pprof/ on root (neither is
// an /api/v2 route: they answer for themselves who may read them) and
// wraps h, the whole server, in the latency histogram.
func (s *Server) metricsRoutes(root *http.ServeMux, h http.Handler, mounts map[string]*http.ServeMux) http.Handler {
	root.Handle("GET /metrics", s.Metrics.Handler())
	root.Handle("/debug/pprof/", s.Metrics.Pprof())
	return s.Metrics.Instrument(h, root, mounts)
}
