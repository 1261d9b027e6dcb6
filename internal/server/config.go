package server

import (
	"cmp"
	"log/slog"
	"net"
	"path/filepath"
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
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// RunnerConcurrency is how many run phases the in-process runner
	// executes at once. Defaults to 2; 0 after defaults means 2.
	RunnerConcurrency int
	// EnginesDir holds terraform/tofu binaries by version
	// (<dir>/terraform/<version>/terraform). Defaults to <data-dir>/engines.
	EnginesDir string
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
	// AuditRetention is how long audit events are kept. Defaults to
	// audit.DefaultRetention (90 days).
	AuditRetention time.Duration
	// MetricsAccess is who may read /metrics: "site-admin" (the default:
	// a site admin's token, or MetricsToken), "open" or "off".
	MetricsAccess string
	// MetricsToken, when set, is a bearer token that may read /metrics.
	MetricsToken string
}

func (c *Config) setDefaults() {
	c.DataDir = cmp.Or(c.DataDir, ".terrace")
	c.Addr = cmp.Or(c.Addr, "127.0.0.1:8443")
	c.Database = cmp.Or(c.Database, filepath.Join(c.DataDir, "terrace.db"))
	c.Blobs = cmp.Or(c.Blobs, filepath.Join(c.DataDir, "blobs"))
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.RunnerConcurrency = cmp.Or(c.RunnerConcurrency, 2)
	c.EnginesDir = cmp.Or(c.EnginesDir, filepath.Join(c.DataDir, "engines"))
	c.CancelGrace = cmp.Or(c.CancelGrace, 10*time.Second)
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
