// Package testenv starts whole Terrace servers for integration tests, on
// either store, over real HTTPS on loopback, with a go-tfe client ready.
//
// A package whose tests use the PostgreSQL store must call
// storetest.Main from its TestMain.
package testenv

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// Stores are the store kinds every behavioural test runs against.
var Stores = []string{"sqlite", "postgres"}

// Options configure a test server.
type Options struct {
	// Store is "sqlite" (default) or "postgres".
	Store string
	// DataDir reuses a data dir (for restarts); a fresh temp dir when empty.
	DataDir string
	// Database reuses a database URL or file (for restarts).
	Database string
	// Addr reuses a listen address (for restarts); a free port when empty.
	Addr string
	// Logs shows server logs in the test output.
	Logs bool
	// RunCLIConfig is extra terraform CLI configuration for runs (for
	// example testprovider's mirror); Runner* tune the in-process runner.
	RunCLIConfig      string
	RunnerConcurrency int
	CancelGrace       time.Duration
	// EnginesDir is the server's engines folder; EnginesDir() when empty.
	EnginesDir string
	// RunTask* shorten the run task timeouts and retries (server
	// defaults when zero).
	RunTaskProgressTimeout, RunTaskTimeout, RunTaskRetryBackoff time.Duration
	// AssessmentInterval is the server's health assessment interval
	// (24h when zero).
	AssessmentInterval time.Duration
	// SMTPAddr is the SMTP server for email notifications (none when empty).
	SMTPAddr string
	// KEK is the key-encryption key (server.Config.KEK); "" keeps the
	// one generated into the data dir.
	KEK string
	// Secret is the signing secret (server.Config.Secret); "" keeps the
	// one generated into the data dir. Replicas share both: see ReplicaOf.
	Secret string
	// Configure, when set, adjusts the server's Config last (limits,
	// timeouts).
	Configure func(*server.Config)
	// MetricsAccess and MetricsToken configure /metrics (server.Config).
	MetricsAccess, MetricsToken string
}

// Env is a running server.
type Env struct {
	Server  *server.Server
	Opts    Options
	URL     string // https://localhost:port
	Host    string // localhost:port
	Token   string // site admin token
	CAFile  string
	HTTP    *http.Client // trusts the server's CA
	Client  *tfe.Client  // go-tfe as the site admin
	cancel  context.CancelFunc
	done    chan error
	stopped bool
}

// New starts a server and stops it when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Store == "" {
		opts.Store = "sqlite"
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Database == "" {
		if opts.Store == "postgres" {
			opts.Database = storetest.PostgresDSN(t)
		} else {
			opts.Database = filepath.Join(opts.DataDir, "terrace.db")
		}
	}
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening: %v", err)
	}
	opts.Addr = ln.Addr().String()
	_, port, _ := net.SplitHostPort(opts.Addr)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if opts.Logs || os.Getenv("TERRACE_TEST_LOGS") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cfg := server.Config{
		DataDir:  opts.DataDir,
		Addr:     opts.Addr,
		Hostname: "localhost:" + port,
		Database: opts.Database,
		Logger:   logger,

		RunCLIConfig:      opts.RunCLIConfig,
		RunnerConcurrency: opts.RunnerConcurrency,
		CancelGrace:       opts.CancelGrace,
		EnginesDir:        cmp.Or(opts.EnginesDir, EnginesDir()),

		RunTaskProgressTimeout: opts.RunTaskProgressTimeout,
		RunTaskTimeout:         opts.RunTaskTimeout,
		RunTaskRetryBackoff:    opts.RunTaskRetryBackoff,
		AssessmentInterval:     opts.AssessmentInterval,
		SMTPAddr:               opts.SMTPAddr,
		KEK:                    opts.KEK,
		Secret:                 opts.Secret,
		MetricsAccess:          opts.MetricsAccess,
		MetricsToken:           opts.MetricsToken,
	}
	if opts.Configure != nil {
		opts.Configure(&cfg)
	}
	s, err := server.New(ctx, cfg)
	if err != nil {
		cancel()
		ln.Close()
		t.Fatalf("starting server: %v", err)
	}
	e := &Env{Server: s, Opts: opts, URL: s.BaseURL, Host: s.Hostname, Token: s.SiteToken, CAFile: s.CAFile, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- s.Serve(ctx, ln) }()
	e.HTTP = httpClient(t, s.CAFile)
	e.Client = e.NewClient(t, s.SiteToken)
	t.Cleanup(func() { e.Stop(t) })
	return e
}

// Stop shuts the server down gracefully (idempotent).
func (e *Env) Stop(t testing.TB) {
	if e.stopped {
		return
	}
	e.stopped = true
	e.cancel()
	select {
	case err := <-e.done:
		if err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Errorf("server did not shut down in 20s")
	}
	e.Server.Close()
}

// Restart stops the server and starts a new one on the same data dir,
// database and address.
func (e *Env) Restart(t testing.TB) *Env {
	t.Helper()
	e.Stop(t)
	return New(t, e.Opts)
}

// NewClient returns a go-tfe client using token.
func (e *Env) NewClient(t testing.TB, token string) *tfe.Client {
	t.Helper()
	c, err := tfe.NewClient(&tfe.Config{Address: e.URL, Token: token, HTTPClient: e.HTTP, RetryServerErrors: false})
	if err != nil {
		t.Fatalf("creating go-tfe client: %v", err)
	}
	return c
}

// ForEachStore runs fn as a subtest per store, each with its own server.
func ForEachStore(t *testing.T, fn func(t *testing.T, e *Env)) {
	for _, st := range Stores {
		t.Run(st, func(t *testing.T) {
			fn(t, New(t, Options{Store: st}))
		})
	}
}

func httpClient(t testing.TB, caFile string) *http.Client {
	pool := x509.NewCertPool()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatalf("reading CA: %v", err)
	}
	pool.AppendCertsFromPEM(pem)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	tr.MaxIdleConnsPerHost = 64
	return &http.Client{Transport: tr, Timeout: 60 * time.Second}
}

// ReplicaOf returns the options of another replica of e: the same store
// and database, and the key-encryption key and signing secret e uses
// (given to it, or generated into its data dir), which replicas share.
func ReplicaOf(t testing.TB, e *Env) Options {
	t.Helper()
	o := Options{Store: e.Opts.Store, Database: e.Opts.Database, KEK: e.Opts.KEK, Secret: e.Opts.Secret}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(e.Opts.DataDir, name))
		if err != nil {
			t.Fatalf("a replica needs the first server's %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	if o.KEK == "" {
		o.KEK = read(seal.KEKFile)
	}
	if o.Secret == "" {
		o.Secret = read("secret")
	}
	return o
}
