package server

import (
	"cmp"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"strconv"
	"time"
)

// Config configures a server. Every field has a flag and a TERRACE_* twin
// in cmd/terrace.
type Config struct {
	// DataDir holds the SQLite database, blobs, TLS files, the secret and
	// the site token. Defaults to ./.terrace.
	DataDir string
	// Addr is the listen address. Defaults to 127.0.0.1:8443.
	Addr string
	// Hostname is the public host:port put into URLs. Defaults to the
	// listen address, with a loopback IP spelled "localhost" (module
	// registry sources need a host name, and the certificate covers it).
	Hostname string
	// Database is a postgres:// URL or a SQLite file path. Defaults to
	// <data-dir>/terrace.db.
	Database string
	// Blobs is a folder or an s3://bucket?endpoint=… URL. Defaults to
	// <data-dir>/blobs.
	Blobs string
	// SiteToken is the site admin's token. Generated on first start when empty.
	SiteToken string
	// TLSCert and TLSKey are PEM files; a private CA and certificate are
	// generated when both are empty.
	TLSCert, TLSKey string
	// Secret signs capability URLs; replicas must share it. Defaults to a
	// random secret kept in <data-dir>/secret.
	Secret string
	// KEK is the key-encryption key (32 bytes, base64 or hex) that wraps
	// the data keys sealing secrets and blobs at rest; replicas must share
	// it. Defaults to a key generated into <data-dir>/kek on the first
	// start (internal/seal).
	KEK string
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// RunnerConcurrency is how many run phases the in-process runner
	// executes at once. Defaults to 2; 0 after defaults means 2.
	RunnerConcurrency int
	// EnginesDir holds terraform/tofu binaries by version
	// (<dir>/terraform/<version>/terraform). Defaults to <data-dir>/engines.
	EnginesDir string
	// EnginesCAFile is a PEM file of CAs trusted, beside the system's,
	// when a runner downloads a terraform version a site admin registered
	// (a mirror whose certificate a private CA signed).
	EnginesCAFile string
	// VCSCAFile is a PEM file of CAs trusted, beside the system's, when
	// Terrace reaches a VCS provider (a self-hosted Gitea or GitHub
	// Enterprise whose certificate a private CA signed).
	VCSCAFile string
	// ScratchDir is where runs get their working folders. Defaults to the
	// OS temporary folder.
	ScratchDir string
	// RunCLIConfig is extra terraform CLI configuration given to every run
	// (provider_installation for a mirror, …).
	RunCLIConfig string
	// PluginCacheDir, when set, is a provider cache shared by runs.
	PluginCacheDir string
	// CancelGrace is how long terraform gets to stop after an interrupt
	// before it is killed. Defaults to 10s.
	CancelGrace time.Duration
	// JobHeartbeatTimeout is how long a runner (an agent, or a replica's
	// in-process runner) may go without a heartbeat before its job is
	// re-queued (a plan) or errored (an apply), and an agent reads as
	// unknown. Defaults to 30s; tests make it short.
	JobHeartbeatTimeout time.Duration
	// AuditRetention is how long audit events are kept. Defaults to
	// audit.DefaultRetention (90 days).
	AuditRetention time.Duration
	// RunTaskProgressTimeout errors a run task result that reports
	// nothing for this long after its service accepted the request (or
	// last said running); RunTaskTimeout errors one with no final result
	// this long after its stage started. Default 10m and 60m, HCP
	// Terraform's; tests make them short.
	RunTaskProgressTimeout, RunTaskTimeout time.Duration
	// RunTaskRetryBackoff is the first wait before a refused run task
	// request is sent again (it doubles). Defaults to 1s.
	RunTaskRetryBackoff time.Duration
	// AssessmentInterval is how long after a workspace's last health
	// assessment the scheduler starts the next. Defaults to 24h; the
	// scheduler looks for due workspaces every AssessmentInterval/10,
	// at most once a minute. A negative interval turns the scheduler off
	// (assessments then start only on request).
	AssessmentInterval time.Duration
	// AssessmentConcurrency is how many assessments the assessment runner
	// executes at once, beside the run queue's RunnerConcurrency.
	// Defaults to 1.
	AssessmentConcurrency int
	// APICIDRs and EgressCIDRs are what GET /api/meta/ip-ranges tells:
	// the addresses clients reach Terrace from, and those its own
	// connections (notifications, run tasks, VCS hosts, policies) come
	// from. CIDR blocks or single addresses.
	APICIDRs, EgressCIDRs []string
	// ModuleTestPoll is how often an idle module test executor looks for
	// queued test runs and for runs whose replica died; a queued run
	// wakes every replica's executor at once. Defaults to 15s.
	ModuleTestPoll time.Duration
	// SMTPAddr (host:port) is the mail server email notifications are sent
	// through; empty means none, and email configurations cannot be
	// enabled. SMTPFrom is the sender (defaults to terrace@<hostname>);
	// SMTPUsername and SMTPPassword authenticate (PLAIN), when set.
	SMTPAddr, SMTPFrom, SMTPUsername, SMTPPassword string
	// TriggerHold is how long an apply's fan-out (the runs it starts in
	// dependent workspaces) waits in its queue before it is done; 0 (the
	// default) means at once. Fault tests hold fan-outs to kill the
	// server while one is queued.
	TriggerHold time.Duration
	// StackApplyWait bounds how long an approved stack deployment plan
	// waits for its workspace to be free (unlocked, no other run) before
	// the deployment run fails saying so. Defaults to 10m.
	StackApplyWait time.Duration

	// HTTP limits. The timeouts are those of net/http.Server: reading a
	// request's header (slow clients are cut off), reading a whole request
	// and writing a whole response (long enough for a large state file
	// over a slow link), and keeping an idle connection. Defaults: 20s,
	// 15m, 15m, 2m.
	ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout time.Duration
	// RateLimitPerToken is requests a second per API token (a burst of one
	// second's worth), advertised in X-RateLimit-Limit; go-tfe paces
	// itself by it. RateLimitPerAddress is requests a second per client
	// IP, for every route. Defaults 1000 and 3000; negative disables.
	RateLimitPerToken, RateLimitPerAddress float64
	// TrustedProxies are CIDRs (or addresses) of reverse proxies whose
	// X-Forwarded-For is believed when keying per-address limits; a
	// request from anywhere else is keyed by its own address.
	TrustedProxies []string
	// MaxRequestBytes caps every request body (routes have tighter limits
	// of their own). Defaults to 256 MiB; negative disables.
	MaxRequestBytes int64
	// MetricsAccess is who may read /metrics: "site-admin" (the default:
	// a site admin's token, or MetricsToken), "open" or "off".
	MetricsAccess string
	// MetricsToken, when set, is a bearer token that may read /metrics.
	MetricsToken string

	// Browser sign-in (internal/signin). SessionIdleTimeout ends a session
	// unused this long, SessionLifetime any session this long after
	// sign-in; defaults 12h and 7 days.
	SessionIdleTimeout, SessionLifetime time.Duration
	// OIDCIssuer enables OpenID Connect single sign-on with that provider;
	// OIDCClientID and OIDCClientSecret are Terrace's client there, and
	// OIDCRedirectURL the callback registered with it (default
	// <base URL>/app/sso/callback). OIDCName labels the sign-in button.
	OIDCIssuer, OIDCClientID, OIDCClientSecret, OIDCRedirectURL, OIDCName string
}

func (c *Config) setDefaults() {
	c.DataDir = cmp.Or(c.DataDir, ".terrace")
	// Absolute, so that the paths made from it that others are given (the
	// CA file the welcome message tells clients to trust, s.CAFile) name
	// the same files from any folder. What the runner hands terraform it
	// makes absolute itself (internal/runner, internal/engine).
	if abs, err := filepath.Abs(c.DataDir); err == nil {
		c.DataDir = abs
	}
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8443")
	c.Database = cmp.Or(c.Database, filepath.Join(c.DataDir, "terrace.db"))
	c.Blobs = cmp.Or(c.Blobs, filepath.Join(c.DataDir, "blobs"))
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.RunnerConcurrency = cmp.Or(c.RunnerConcurrency, 2)
	c.EnginesDir = cmp.Or(c.EnginesDir, filepath.Join(c.DataDir, "engines"))
	c.CancelGrace = cmp.Or(c.CancelGrace, 10*time.Second)
	c.JobHeartbeatTimeout = cmp.Or(c.JobHeartbeatTimeout, 30*time.Second)
	c.AssessmentInterval = cmp.Or(c.AssessmentInterval, 24*time.Hour)
	c.AssessmentConcurrency = cmp.Or(c.AssessmentConcurrency, 1)
	c.StackApplyWait = cmp.Or(c.StackApplyWait, 10*time.Minute)
	if c.SMTPFrom == "" {
		host, _, err := net.SplitHostPort(cmp.Or(c.Hostname, hostnameFor(c.Addr)))
		if err != nil {
			host = "localhost"
		}
		c.SMTPFrom = "terrace@" + host
	}
	c.ReadHeaderTimeout = cmp.Or(c.ReadHeaderTimeout, 20*time.Second)
	c.ReadTimeout = cmp.Or(c.ReadTimeout, 15*time.Minute)
	c.WriteTimeout = cmp.Or(c.WriteTimeout, 15*time.Minute)
	c.IdleTimeout = cmp.Or(c.IdleTimeout, 2*time.Minute)
	c.RateLimitPerToken = cmp.Or(c.RateLimitPerToken, 1000)
	c.RateLimitPerAddress = cmp.Or(c.RateLimitPerAddress, 3000)
	c.MaxRequestBytes = cmp.Or(c.MaxRequestBytes, 256<<20)
}

// check refuses settings that cannot work together.
func (c *Config) check() error {
	if c.JobHeartbeatTimeout < time.Second {
		// Runners heartbeat and idle agents come back every third of it:
		// below a second that is a busy loop, not a lease.
		return fmt.Errorf("--job-heartbeat-timeout %s is too short: use at least 1s", c.JobHeartbeatTimeout)
	}
	if c.SMTPAddr != "" {
		// The SMTP settings show the host and the port apart.
		_, port, err := net.SplitHostPort(c.SMTPAddr)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--smtp-addr %q must be host:port (for example mail.example.com:587)", c.SMTPAddr)
		}
	}
	return nil
}

// hostnameFor is the default public hostname for a listen address.
func hostnameFor(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}
