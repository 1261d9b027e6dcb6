package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/jobapi"
)

func agentCmd() *cobra.Command {
	var cfg jobapi.AgentConfig
	var tokenFile, logLevel, enginesDir, enginesCAFile, runCLIConfig string
	var releasePages bool
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run jobs of an agent pool's workspaces, polling a Terrace server (no inbound connection)",
		Long: `Run an agent: it registers with the server with an agent token, waits for
jobs of its agent pool's workspaces (execution mode "agent"), runs terraform
or tofu for them and streams their logs and state back. On SIGTERM or
SIGINT it finishes the job it runs and takes no new one.

Every flag can also be set with an environment variable: --address is
TERRACE_AGENT_ADDRESS, and so on; the token may be read from the file named
by --token-file or TERRACE_AGENT_TOKEN_FILE.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := envTwinsWith(cmd.Flags(), "TERRACE_AGENT_"); err != nil {
				return err
			}
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			if cfg.Token == "" && tokenFile != "" {
				b, err := os.ReadFile(tokenFile)
				if err != nil {
					return fmt.Errorf("--token-file: %w", err)
				}
				cfg.Token = strings.TrimSpace(string(b))
			}
			if cfg.Token == "" {
				return errors.New("an agent token is required: --token, --token-file or TERRACE_AGENT_TOKEN")
			}
			if cfg.Address == "" {
				return errors.New("--address (or TERRACE_AGENT_ADDRESS) is required: the server's https://host:port")
			}
			if runCLIConfig != "" {
				b, err := os.ReadFile(runCLIConfig)
				if err != nil {
					return fmt.Errorf("--run-cli-config: %w", err)
				}
				cfg.Runner.CLIConfig = string(b)
			}
			downloads, err := engine.DownloadClient(enginesCAFile)
			if err != nil {
				return fmt.Errorf("--engines-ca-file: %w", err)
			}
			cfg.Runner.Engines = &engine.Finder{Dir: enginesDir, HTTP: downloads}
			if releasePages {
				go releaseBinaryPages(cmd.Context(), cfg.Logger, releaseAfter)
			}
			return jobapi.RunAgent(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Address, "address", "", "the server's URL, https://host:port")
	f.StringVar(&cfg.Token, "token", "", "an agent token of the pool this agent serves")
	f.StringVar(&tokenFile, "token-file", "", "a file holding the agent token")
	f.StringVar(&cfg.Name, "name", "", "the agent's name, shown in the agents API and in run logs (default: the host name)")
	f.StringVar(&cfg.CAFile, "ca-file", "", "the CA certificate (PEM) that signed the server's certificate, when not a system one")
	f.IntVar(&cfg.Runner.Concurrency, "concurrency", 1, "jobs executed at once")
	f.StringVar(&enginesDir, "engines-dir", "", "terraform/tofu binaries by version, as <dir>/terraform/<version>/terraform (PATH is searched too); a registered version a job needs is installed here")
	f.StringVar(&enginesCAFile, "engines-ca-file", "", "CA certificates (PEM) trusted, beside the system's, when a job downloads a terraform version a site admin registered")
	f.StringVar(&cfg.Runner.ScratchDir, "scratch-dir", "", "where jobs get their working folders (default: the OS temp folder)")
	f.StringVar(&cfg.Runner.PluginCacheDir, "plugin-cache-dir", "", "a provider plugin cache shared by jobs")
	f.StringVar(&runCLIConfig, "run-cli-config", "", "a terraform CLI config file whose contents every job gets (e.g. provider_installation)")
	f.DurationVar(&cfg.Runner.CancelGrace, "cancel-grace", 10*time.Second, "how long terraform gets to stop after a cancel before it is killed")
	f.DurationVar(&cfg.Runner.Heartbeat, "heartbeat", 5*time.Second, "longest wait between heartbeats; the agent never waits more than a third of the lease the server gives each job (its --job-heartbeat-timeout)")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&releasePages, "release-binary-pages", true, "on Linux, 10 s after the start give back the pages of the terrace binary that start-up touched (as terrace server does)")
	return cmd
}
