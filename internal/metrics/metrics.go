// Package metrics exposes Terrace's operational figures in the Prometheus
// text format at /metrics, and the Go profiler at /debug/pprof/ for site
// admins.
//
// What it measures, and where each figure comes from:
//
//   - HTTP request latency, by route pattern (the ServeMux pattern that
//     matched, never the raw path, so that label values stay bounded) and
//     status class: Instrument wraps the server's handler.
//   - Runs by status and the job queue (depth and the oldest job's age
//     per phase): read from the store at scrape time, so every replica
//     reports the same store-wide figures.
//   - Run transitions, plan and apply durations: a run.Service observer,
//     in the process that committed each transition (sum over replicas).
//   - Job claims and the time each claimed job waited in the queue:
//     counted where runners claim (CountClaims wraps a runner.API).
//   - Notification delivery attempts by destination and outcome: a
//     notify.Service hook.
//   - Go runtime and process figures (memory, goroutines, CPU).
//
// The composition root (internal/server) builds one Metrics per server
// with its own registry and wires these hooks; this package holds no
// domain logic.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/runtask"
)

// Access says who may read /metrics.
type Access string

const (
	// AccessSiteAdmin: a site admin's token, or the dedicated metrics
	// token when one is configured. The default.
	AccessSiteAdmin Access = "site-admin"
	// AccessOpen: anyone who reaches the port (a scraper on a private
	// network).
	AccessOpen Access = "open"
	// AccessOff: /metrics answers 404.
	AccessOff Access = "off"
)

// Store is what the scrape-time figures are read from.
type Store interface {
	StatusCounts(ctx context.Context) (map[run.Status]int, error)
	QueueStats(ctx context.Context) (map[string]run.QueueDepth, error)
}

// ModuleTests counts module test runs by status (moduletest.Service).
type ModuleTests interface {
	TestRunStatusCounts(ctx context.Context) (map[string]int, error)
}

// Outbox counts notification deliveries not yet final.
type Outbox interface {
	Pending(ctx context.Context) (int, error)
}

// Authenticator turns a bearer token into a principal.
type Authenticator interface {
	Authenticate(ctx context.Context, secret string) (*auth.Principal, error)
}

// Options configure Metrics.
type Options struct {
	// Access is who may read /metrics; AccessSiteAdmin when empty.
	Access Access
	// Token, when set, is a bearer token that may read /metrics (and
	// nothing else) besides site admins.
	Token string
	// Auth authenticates the callers of /metrics and /debug/pprof/.
	Auth Authenticator
	// Store, Outbox and ModuleTests feed the scrape-time figures (any may
	// be nil).
	Store       Store
	Outbox      Outbox
	ModuleTests ModuleTests
	Logger      *slog.Logger
}

// Metrics is one server's registry and instruments.
type Metrics struct {
	o   Options
	reg *prometheus.Registry

	requests   *prometheus.HistogramVec
	statements *prometheus.HistogramVec // store statements a request ran, by route
	inFlight   prometheus.Gauge
	moves      *prometheus.CounterVec
	phases     *prometheus.HistogramVec
	claims     *prometheus.CounterVec
	queueWait  *prometheus.HistogramVec
	deliveries *prometheus.CounterVec
	// taskRequests counts requests to run task services by outcome.
	taskRequests *prometheus.CounterVec
	// outboxAttempts counts the outbox's recorded attempts by topic and
	// outcome (every durable delivery).
	outboxAttempts *prometheus.CounterVec
	// testDurations: how long module test runs ran, by how they ended.
	testDurations *prometheus.HistogramVec

	// Scrape-time figures, refreshed under scrapeMu before each scrape.
	scrapeMu      sync.Mutex
	runs          *prometheus.GaugeVec
	statuses      map[run.Status]bool // the statuses runs has shown
	queued        *prometheus.GaugeVec
	oldest        *prometheus.GaugeVec
	outbox        prometheus.Gauge
	testRuns      *prometheus.GaugeVec
	scrapeErrors  prometheus.Counter
	scrapeHandler http.Handler
}

// New validates o and builds the registry.
func New(o Options) (*Metrics, error) {
	switch o.Access {
	case "":
		o.Access = AccessSiteAdmin
	case AccessSiteAdmin, AccessOpen, AccessOff:
	default:
		return nil, fmt.Errorf("metrics access %q: want %s, %s or %s", o.Access, AccessSiteAdmin, AccessOpen, AccessOff)
	}
	if o.Auth == nil && o.Access != AccessOpen && o.Access != AccessOff {
		return nil, fmt.Errorf("metrics: access %s needs an authenticator", o.Access)
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	m := &Metrics{o: o, reg: prometheus.NewRegistry(), statuses: map[run.Status]bool{}}
	m.requests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_http_request_duration_seconds",
		Help:    "Time to answer an HTTP request, by route pattern (the matched ServeMux pattern; \"unmatched\" when none) and status class.",
		Buckets: prometheus.DefBuckets,
	}, []string{"route", "status_class"})
	m.statements = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_http_request_statements",
		Help:    "Store statements an HTTP request ran (in transactions or not; not the background work it started), by route pattern: a route whose count grows with the data reads per row.",
		Buckets: []float64{0, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144},
	}, []string{"route"})
	m.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terrace_http_requests_in_flight", Help: "HTTP requests being answered now."})
	m.moves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_run_transitions_total",
		Help: "Run status changes committed by this process, by the status entered.",
	}, []string{"status"})
	m.phases = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_run_phase_duration_seconds",
		Help:    "How long a plan or apply ran (from claim to its end), by phase and the status it ended in.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 16), // 50ms … ~27min
	}, []string{"phase", "outcome"})
	m.claims = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_job_claims_total",
		Help: "Jobs claimed by this process's runners, by phase.",
	}, []string{"phase"})
	m.queueWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_job_queue_wait_seconds",
		Help:    "How long a claimed job waited in the queue, by phase.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 12), // 1ms … ~70min
	}, []string{"phase"})
	m.deliveries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_notification_delivery_attempts_total",
		Help: "Notification delivery attempts recorded by this process, by destination type and outcome (delivered, retry, failed, dropped).",
	}, []string{"destination", "outcome"})
	m.taskRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_run_task_request_attempts_total",
		Help: "Requests this process sent to run task services, by outcome (accepted, retry, errored).",
	}, []string{"outcome"})
	m.outboxAttempts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "terrace_outbox_attempts_total",
		Help: "Outbox attempts recorded by this process, by topic (notification, run-task, trigger-fan-out) and outcome (handled, retry, failed).",
	}, []string{"topic", "outcome"})
	m.runs = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_runs",
		Help: "Runs in the store by status (read at scrape time).",
	}, []string{"status"})
	m.queued = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_job_queue_depth",
		Help: "Jobs waiting for a runner, by phase (read at scrape time).",
	}, []string{"phase"})
	m.oldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_job_queue_oldest_age_seconds",
		Help: "How long the oldest waiting job of each phase has waited (read at scrape time; 0 when none waits).",
	}, []string{"phase"})
	m.outbox = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "terrace_notification_outbox_pending",
		Help: "Notification deliveries not yet delivered or given up (read at scrape time).",
	})
	m.testRuns = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "terrace_module_test_runs",
		Help: "Module test runs in the store by status: queued, running, finished, errored, canceled (read at scrape time).",
	}, []string{"status"})
	m.testDurations = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "terrace_module_test_run_duration_seconds",
		Help:    "How long a module test run ran (from its start to its end), by the status it ended in.",
		Buckets: prometheus.ExponentialBuckets(0.25, 2, 16), // 250ms … ~2h
	}, []string{"outcome"})
	m.scrapeErrors = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "terrace_metrics_store_errors_total",
		Help: "Scrapes whose store-derived figures could not be read (they are left out of that scrape).",
	})
	m.reg.MustRegister(m.requests, m.statements, m.inFlight, m.moves, m.phases, m.claims, m.queueWait, m.deliveries, m.taskRequests, m.outboxAttempts,
		m.runs, m.queued, m.oldest, m.outbox, m.testRuns, m.testDurations, m.scrapeErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every phase and status class starts at zero, so that a rate() over
	// a fresh server has a series to work on.
	for _, p := range []string{"plan", "apply"} {
		m.claims.WithLabelValues(p)
		m.queued.WithLabelValues(p)
		m.oldest.WithLabelValues(p)
	}
	for _, st := range moduletest.Statuses {
		m.testRuns.WithLabelValues(string(st))
	}
	m.scrapeHandler = promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(o.Logger.Handler(), slog.LevelError)})
	return m, nil
}

// Registry is the registry behind /metrics (tests and embedders gather it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RunTransition is a run.Service observer: it counts every status entered
// and, when a plan or apply ends, how long it ran.
func (m *Metrics) RunTransition(_ context.Context, t run.Transition) {
	m.moves.WithLabelValues(string(t.To)).Inc()
	var phase, startKey string
	switch t.From {
	case run.Planning:
		phase, startKey = "plan", string(run.Planning)+"-at"
	case run.Applying:
		phase, startKey = "apply", string(run.Applying)+"-at"
	default:
		return
	}
	start, ok := t.Run.Timestamps[startKey]
	if !ok || start.IsZero() {
		return
	}
	end, ok := t.Run.Timestamps[string(t.To)+"-at"]
	if !ok || end.Before(start) {
		end = time.Now() // forced moves (force-cancel, the reaper) stamp no time
	}
	m.phases.WithLabelValues(phase, string(t.To)).Observe(end.Sub(start).Seconds())
}

// ModuleTestEnded is a moduletest.Service hook: a test run that started
// at started ended in status at ended.
func (m *Metrics) ModuleTestEnded(status string, started, ended time.Time) {
	if started.IsZero() || ended.Before(started) {
		return
	}
	m.testDurations.WithLabelValues(status).Observe(ended.Sub(started).Seconds())
}

// NotificationAttempt is a notify.Service hook.
func (m *Metrics) NotificationAttempt(d notify.Destination, o notify.AttemptOutcome) {
	m.deliveries.WithLabelValues(string(d), string(o)).Inc()
}

// RunTaskAttempt is a runtask.Service hook.
func (m *Metrics) RunTaskAttempt(o runtask.AttemptOutcome) {
	m.taskRequests.WithLabelValues(string(o)).Inc()
}

// OutboxAttempt is an outbox.Queue hook.
func (m *Metrics) OutboxAttempt(topic string, o outbox.Outcome) {
	m.outboxAttempts.WithLabelValues(topic, string(o)).Inc()
}

// CountClaims wraps a runner's API so that every job it claims is
// counted, with the time the job waited in the queue.
func (m *Metrics) CountClaims(api runner.API) runner.API { return claimCounter{api, m} }

type claimCounter struct {
	runner.API
	m *Metrics
}

func (c claimCounter) Claim(ctx context.Context, runnerID string) (*run.Job, error) {
	job, err := c.API.Claim(ctx, runnerID)
	if job != nil {
		c.m.claimed(job)
	}
	return job, err
}

func (m *Metrics) claimed(job *run.Job) {
	phase := string(job.Phase)
	queuedKey, startKey := string(run.PlanQueued)+"-at", string(run.Planning)+"-at"
	if phase != "plan" {
		phase = "apply"
		queuedKey, startKey = string(run.ApplyQueued)+"-at", string(run.Applying)+"-at"
	}
	m.claims.WithLabelValues(phase).Inc()
	if job.Run == nil {
		return
	}
	queued, ok1 := job.Run.Timestamps[queuedKey]
	started, ok2 := job.Run.Timestamps[startKey]
	if ok1 && ok2 && !started.Before(queued) {
		m.queueWait.WithLabelValues(phase).Observe(started.Sub(queued).Seconds())
	}
}

// refresh reads the scrape-time figures from the store. On an error the
// affected figures are left out of this scrape rather than shown stale.
func (m *Metrics) refresh(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if m.o.Store != nil {
		if counts, err := m.o.Store.StatusCounts(ctx); err != nil {
			m.runs.Reset()
			clear(m.statuses)
			m.storeError("counting runs by status", err)
		} else {
			// A status seen once stays, at 0 when no run is in it now
			// (statuses are the state machine's, a bounded set).
			for st := range counts {
				m.statuses[st] = true
			}
			for st := range m.statuses {
				m.runs.WithLabelValues(string(st)).Set(float64(counts[st]))
			}
		}
		if q, err := m.o.Store.QueueStats(ctx); err != nil {
			m.queued.Reset()
			m.oldest.Reset()
			m.storeError("reading the job queue", err)
		} else {
			for _, p := range []string{"plan", "apply"} {
				d := q[p]
				age := 0.0
				if !d.Oldest.IsZero() {
					age = max(time.Since(d.Oldest).Seconds(), 0)
				}
				m.queued.WithLabelValues(p).Set(float64(d.Queued))
				m.oldest.WithLabelValues(p).Set(age)
			}
		}
	}
	if m.o.ModuleTests != nil {
		if counts, err := m.o.ModuleTests.TestRunStatusCounts(ctx); err != nil {
			m.testRuns.Reset()
			m.storeError("counting module test runs by status", err)
		} else {
			for _, st := range moduletest.Statuses {
				m.testRuns.WithLabelValues(string(st)).Set(float64(counts[string(st)]))
			}
		}
	}
	if m.o.Outbox != nil {
		if n, err := m.o.Outbox.Pending(ctx); err != nil {
			m.storeError("counting pending notifications", err)
		} else {
			m.outbox.Set(float64(n))
		}
	}
}

func (m *Metrics) storeError(what string, err error) {
	m.scrapeErrors.Inc()
	m.o.Logger.Warn("metrics: "+what, "error", err)
}
