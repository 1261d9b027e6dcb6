package jobapi

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/runner"
)

// AgentConfig configures `terrace agent`.
type AgentConfig struct {
	// Address is the server's URL (https://host:port).
	Address string
	// Token is an agent token of the pool the agent serves.
	Token string
	// Name is shown in the agents API and in every log the agent writes.
	// Defaults to the host name.
	Name string
	// CAFile, when set, is the CA that signed the server's certificate
	// (for the agent's calls and for terraform's).
	CAFile string
	// Runner configures job execution (engines, scratch and cache
	// folders, CLI config, concurrency: 1 unless set).
	Runner runner.Config
	Logger *slog.Logger
}

// RunAgent registers an agent and runs jobs until ctx ends; then it
// drains (finishes the jobs it runs, takes no new one), reports itself
// exited and returns. It needs no inbound connection: every call goes
// from the agent to the server.
func RunAgent(ctx context.Context, cfg AgentConfig) (err error) {
	if cfg.Address == "" || cfg.Token == "" {
		return errors.New("an agent needs the server's address and an agent token")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Name == "" {
		cfg.Name, _ = os.Hostname()
	}
	httpc, err := agentHTTP(cfg.CAFile)
	if err != nil {
		return err
	}
	heartbeat := cmpDur(cfg.Runner.Heartbeat, 5*time.Second)
	c := &Client{BaseURL: strings.TrimSuffix(cfg.Address, "/"), HTTP: httpc, Token: cfg.Token,
		ClaimWait: 25 * time.Second, HeartbeatWait: heartbeat, CAFile: cfg.CAFile}
	reg, err := c.Register(ctx, cfg.Name)
	if err != nil {
		return fmt.Errorf("registering with %s: %w", cfg.Address, err)
	}
	log := cfg.Logger.With("agent", reg.ID, "name", cfg.Name, "pool", reg.Pool)
	log.Info("agent registered; waiting for jobs")
	rc := cfg.Runner
	rc.ID = reg.ID
	if rc.Concurrency <= 0 {
		rc.Concurrency = 1
	}
	if rc.Engines == nil {
		rc.Engines = &engine.Finder{}
	}
	if rc.Engines.Host == "" {
		// A missing engine's message names the agent, not the server.
		rc.Engines.Host = fmt.Sprintf("agent %q", cfg.Name)
	}
	rc.Describe = fmt.Sprintf("Executed by agent %q (%s) of agent pool %s", cfg.Name, reg.ID, reg.Pool)
	rc.Logger = log
	if err := checkScratch(rc.ScratchDir); err != nil {
		// Fatal: no job could run here. Say so before exiting.
		reportStatus(c, log, "errored")
		return err
	}
	rc.OnFault = func(job *run.Job, err error) {
		log.Error("a job failed because of this agent", "run", job.RunID, "phase", job.Phase, "error", err)
		reportStatus(c, log, "errored")
	}
	// Module test runs of the pool come with claims too, and run in the
	// claiming slot, as terraform and its plugins are set up for jobs.
	c.ModuleTests = true
	tests := &agentRunner{Client: c, log: log, exec: moduletest.ExecConfig{Engines: rc.Engines, ScratchDir: rc.ScratchDir,
		CLIConfig: rc.CLIConfig, PluginCacheDir: rc.PluginCacheDir, CAFile: cfg.CAFile, CancelGrace: rc.CancelGrace}}
	r := runner.New(tests, rc)
	// Jobs run on a context that the stop signal does not cancel: a
	// draining agent finishes what it started.
	r.Start(context.WithoutCancel(ctx))
	// The pool's run task requests, sent from here (request forwarding),
	// with a client of their own: the agent's roots and proxy settings.
	send, err := agentHTTP(cfg.CAFile)
	if err != nil {
		return err
	}
	go forwardLoop(ctx, c, send, log)
	<-ctx.Done()
	log.Info("stopping: finishing the running jobs, taking no new one", "running", r.Busy())
	r.Drain()
	reportStatus(c, log, "exited")
	log.Info("agent exited")
	return nil
}

// reportStatus tells the server the agent's status (exited, errored); a
// failure is logged, as the agent has nothing better to do about it.
func reportStatus(c *Client, log *slog.Logger, status string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.SetStatus(ctx, status); err != nil {
		log.Warn("reporting the agent's status", "status", status, "error", err)
	}
}

// checkScratch makes sure jobs can get working folders in dir (the OS
// temp folder when empty).
func checkScratch(dir string) error {
	d, err := os.MkdirTemp(dir, "terrace-check-")
	if err != nil {
		return fmt.Errorf("jobs cannot get working folders: %w", err)
	}
	return os.Remove(d)
}

func cmpDur(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// agentHTTP is the agent's HTTPS client: the system roots plus caFile.
func agentHTTP(caFile string) (*http.Client, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("reading the CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("the CA file %s holds no PEM certificate", caFile)
		}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
