package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/terracehq/terrace/internal/binpages"
	"github.com/terracehq/terrace/internal/server"
)

func serverCmd() *cobra.Command {
	var cfg server.Config
	var logLevel, runCLIConfig string
	var releasePages bool
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the Terrace server (API, scheduler and an in-process runner)",
		Long: `Run the Terrace server.

Every flag can also be set with an environment variable: --data-dir is
TERRACE_DATA_DIR, and so on. Secrets (--site-token, --secret, --kek,
--metrics-token) may instead be read from a file named by
TERRACE_SITE_TOKEN_FILE / TERRACE_SECRET_FILE / TERRACE_KEK_FILE /
TERRACE_METRICS_TOKEN_FILE.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envTwins(cmd.Flags()); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			slog.SetDefault(cfg.Logger)
			if runCLIConfig != "" {
				b, err := os.ReadFile(runCLIConfig)
				if err != nil {
					return fmt.Errorf("--run-cli-config: %w", err)
				}
				cfg.RunCLIConfig = string(b)
			}
			s, err := server.New(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer s.Close()
			printWelcome(s)
			if releasePages {
				go releaseBinaryPages(cmd.Context(), cfg.Logger, releaseAfter)
			}
			cfg.Logger.Info("terrace listening", "addr", cfg.Addr, "url", s.BaseURL)
			err = s.ListenAndServe(cmd.Context())
			cfg.Logger.Info("terrace stopped")
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", ".terrace", "folder for the SQLite database, blobs, TLS files and secrets")
	f.StringVar(&cfg.Addr, "addr", "127.0.0.1:8443", "listen address")
	f.StringVar(&cfg.Hostname, "hostname", "", "public host:port put into URLs (default: the listen address; a loopback IP becomes localhost)")
	f.StringVar(&cfg.Database, "database", "", "postgres://… URL, or a SQLite file (default <data-dir>/terrace.db)")
	f.StringVar(&cfg.Blobs, "blobs", "", "blob folder, or s3://bucket?endpoint=…&region=…&use_path_style=true (default <data-dir>/blobs)")
	f.StringVar(&cfg.SiteToken, "site-token", "", "site-admin user token (generated on first start into <data-dir>/site-token when unset)")
	f.StringVar(&cfg.TLSCert, "tls-cert", "", "TLS certificate PEM file (default: a generated local CA and certificate)")
	f.StringVar(&cfg.TLSKey, "tls-key", "", "TLS private key PEM file")
	f.StringVar(&cfg.Secret, "secret", "", "secret that signs capability URLs; replicas must share it (default: generated into <data-dir>/secret)")
	f.StringVar(&cfg.KEK, "kek", "", "key-encryption key (32 bytes as base64 or hex) for secrets and state at rest; replicas must share it (default: generated into <data-dir>/kek)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.IntVar(&cfg.RunnerConcurrency, "runner-concurrency", 2, "run phases the in-process runner executes at once")
	f.StringVar(&cfg.EnginesDir, "engines-dir", "", "terraform/tofu binaries by version, as <dir>/terraform/<version>/terraform (default <data-dir>/engines; PATH is searched too)")
	f.StringVar(&cfg.EnginesCAFile, "engines-ca-file", "", "CA certificates (PEM) trusted, beside the system's, when a run downloads a terraform version a site admin registered")
	f.StringVar(&cfg.VCSCAFile, "vcs-ca-file", "", "CA certificates (PEM) trusted, beside the system's, when Terrace reaches a VCS provider (a self-hosted Gitea or GitHub Enterprise)")
	f.StringVar(&cfg.ScratchDir, "scratch-dir", "", "where runs get their working folders (default: the OS temp folder)")
	f.StringVar(&runCLIConfig, "run-cli-config", "", "a terraform CLI config file whose contents every run gets (e.g. provider_installation for a mirror)")
	f.StringVar(&cfg.PluginCacheDir, "plugin-cache-dir", "", "a provider plugin cache shared by runs")
	f.DurationVar(&cfg.CancelGrace, "cancel-grace", 10*time.Second, "how long terraform gets to stop after a cancel before it is killed")
	f.DurationVar(&cfg.JobHeartbeatTimeout, "job-heartbeat-timeout", 30*time.Second, "a runner or agent silent this long loses its job: a plan is re-queued, an apply errors")
	f.DurationVar(&cfg.AuditRetention, "audit-retention", 90*24*time.Hour, "how long audit trail events are kept before they are pruned")
	f.DurationVar(&cfg.RunTaskProgressTimeout, "run-task-progress-timeout", 10*time.Minute, "a run task result with no progress report for this long errors")
	f.DurationVar(&cfg.RunTaskTimeout, "run-task-timeout", 60*time.Minute, "a run task result with no final status this long after its stage started errors")
	f.DurationVar(&cfg.RunTaskRetryBackoff, "run-task-retry-backoff", time.Second, "first wait before a refused run task request is sent again (doubles each time)")
	f.DurationVar(&cfg.AssessmentInterval, "assessment-interval", 24*time.Hour, "how often each workspace with health assessments enabled is assessed for drift")
	f.StringVar(&cfg.SMTPAddr, "smtp-addr", "", "host:port of the SMTP server email notifications are sent through (none: email destinations cannot be enabled); a site admin's SMTP settings, once set, replace the --smtp-* flags one by one")
	f.StringVar(&cfg.SMTPFrom, "smtp-from", "", "sender address of notification emails (default terrace@<hostname>)")
	f.StringVar(&cfg.SMTPUsername, "smtp-username", "", "SMTP user name (PLAIN authentication; needs STARTTLS unless the server is localhost)")
	f.StringVar(&cfg.SMTPPassword, "smtp-password", "", "SMTP password (also TERRACE_SMTP_PASSWORD_FILE)")
	f.DurationVar(&cfg.TriggerHold, "trigger-hold", 0, "how long an apply's queued fan-out waits before it starts the dependent runs (0: at once)")
	f.DurationVar(&cfg.StackApplyWait, "stack-apply-wait", 10*time.Minute, "how long an approved stack deployment plan waits for its busy or locked workspace before the deployment run fails")
	f.IntVar(&cfg.AssessmentConcurrency, "assessment-concurrency", 1, "health assessments executed at once (beside, not within, --runner-concurrency)")
	f.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 20*time.Second, "how long a client may take to send a request's header")
	f.DurationVar(&cfg.ReadTimeout, "read-timeout", 15*time.Minute, "how long a client may take to send a whole request (large state uploads)")
	f.DurationVar(&cfg.WriteTimeout, "write-timeout", 15*time.Minute, "how long writing a whole response may take (large state downloads)")
	f.DurationVar(&cfg.IdleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection is kept")
	f.Float64Var(&cfg.RateLimitPerToken, "rate-limit", 1000, "API requests a second per token, sent as X-RateLimit-Limit (negative: no limit); a site admin's api-rate-limit settings, once set, replace it")
	f.Float64Var(&cfg.RateLimitPerAddress, "rate-limit-per-address", 3000, "requests a second per client IP address (negative: no limit)")
	f.StringSliceVar(&cfg.TrustedProxies, "trusted-proxies", nil, "CIDRs of reverse proxies whose X-Forwarded-For names the client for per-address limits (comma-separated)")
	f.Int64Var(&cfg.MaxRequestBytes, "max-request-bytes", 256<<20, "largest request body on any route (negative: no cap)")
	f.StringSliceVar(&cfg.APICIDRs, "api-cidrs", nil, "CIDR blocks clients reach Terrace from, as GET /api/meta/ip-ranges tells them (comma-separated)")
	f.StringSliceVar(&cfg.EgressCIDRs, "egress-cidrs", nil, "CIDR blocks Terrace's own connections (notifications, run tasks, VCS hosts) come from, as GET /api/meta/ip-ranges tells them (comma-separated)")
	f.StringVar(&cfg.MetricsAccess, "metrics-access", "site-admin", "who may read /metrics: site-admin (a site admin's token or --metrics-token), open, or off")
	f.StringVar(&cfg.MetricsToken, "metrics-token", "", "a bearer token that may read /metrics (for a scraper; TERRACE_METRICS_TOKEN_FILE works too)")
	f.BoolVar(&releasePages, "release-binary-pages", true, "on Linux, 10 s after the start give back the pages of the terrace binary that start-up touched, and drop them from the page cache (those used later are read again from the file, its tables a page at a time): about 30 MB less resident memory at idle")
	signinFlags(f, &cfg)
	return cmd
}

// releaseAfter is how long after the start the binary's pages are
// released: after the migrations, the runner's recovery and the first
// pass of the background loops.
const releaseAfter = 10 * time.Second

// releaseBinaryPages releases, after wait, the pages of the binary that
// start-up made resident (internal/binpages, docs/design/memory.md).
func releaseBinaryPages(ctx context.Context, logger *slog.Logger, wait time.Duration) {
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return
	case <-t.C:
	}
	r, err := binpages.Release()
	if err != nil {
		logger.Warn("releasing the binary's start-up pages", "err", err)
		return
	}
	logger.Debug("released the binary's start-up pages", "mappings", r.Mappings, "resident_mb", r.Bytes>>20, "skipped", r.Skipped, "evicted", r.Evicted)
}

// envTwins sets every flag not given on the command line from its
// TERRACE_* environment variable, or for secrets from TERRACE_*_FILE.
func envTwins(fs *pflag.FlagSet) error { return envTwinsWith(fs, "TERRACE_") }

// envTwinsWith is envTwins with another prefix (TERRACE_AGENT_ for
// `terrace agent`).
func envTwinsWith(fs *pflag.FlagSet, prefix string) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || err != nil {
			return
		}
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok {
			err = fs.Set(f.Name, v)
			return
		}
		if path, ok := os.LookupEnv(name + "_FILE"); ok {
			b, rerr := os.ReadFile(path)
			if rerr != nil {
				err = fmt.Errorf("%s_FILE: %w", name, rerr)
				return
			}
			err = fs.Set(f.Name, strings.TrimSpace(string(b)))
		}
	})
	return err
}

func printWelcome(s *server.Server) {
	w := os.Stdout
	fmt.Fprintf(w, "\nTerrace %s is starting at %s\n\n", server.Version, s.BaseURL)
	if s.NewSiteToken {
		fmt.Fprintf(w, "A site-admin token was generated (shown once; also in the data dir's site-token file):\n\n    %s\n\n", s.SiteToken)
	}
	fmt.Fprintf(w, "To point terraform at Terrace, put this in your CLI config (~/.terraformrc):\n\n")
	fmt.Fprintf(w, "    credentials %q {\n      token = \"<your token>\"\n    }\n\n", s.Hostname)
	if s.CAFile != "" {
		fmt.Fprintf(w, "and trust Terrace's local CA:\n\n    export SSL_CERT_FILE=%s\n\n", s.CAFile)
	}
	fmt.Fprintf(w, "then use a cloud block:\n\n    terraform {\n      cloud {\n        hostname     = %q\n        organization = \"<org>\"\n        workspaces { name = \"<workspace>\" }\n      }\n    }\n\n", s.Hostname)
}
