package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testprovider"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Terrace is a running `terrace server`.
type Terrace struct {
	URL     string // https://localhost:port
	Token   string // the site token
	CAFile  string
	LogFile string
	// ReceiverURL is the local HTTP receiver given to tests as
	// TFC_RUN_TASK_URL ("" for none).
	ReceiverURL string
	cmd         *exec.Cmd
	done        chan error
}

// writeRunCLIConfig lays out the offline stand-ins for hashicorp/null and
// hashicorp/time as a filesystem mirror in dir/providers and writes the CLI
// config that installs them from it to dir/run-cli.tfrc, whose path it
// returns: every run of the server gets it (--run-cli-config), so go-tfe's
// run fixtures (null_resource, time_sleep) plan and apply without the
// network.
func writeRunCLIConfig(dir string) (string, error) {
	cfg, err := testprovider.WriteMirror(filepath.Join(dir, "providers"), testprovider.Options{})
	if err != nil {
		return "", fmt.Errorf("building the test providers: %w", err)
	}
	path := filepath.Join(dir, "run-cli.tfrc")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", err
	}
	return path, nil
}

// buildTerrace compiles cmd/terrace into dir.
func buildTerrace(ctx context.Context, repo, dir string) (string, error) {
	bin := filepath.Join(dir, "terrace")
	if out, err := goCmd(ctx, repo, nil, "build", "-o", bin, "./cmd/terrace"); err != nil {
		return "", fmt.Errorf("building terrace: %v\n%s", err, out)
	}
	return bin, nil
}

// startTerrace starts the server on a free loopback port with a fresh data
// dir (dir/data, its log in dir/server.log) and waits until /healthz
// answers over HTTPS. database is "" for the embedded SQLite store;
// runCLIConfig, when set, is the CLI config file every run gets; smtpAddr,
// when set, the SMTP server email notifications go to.
func startTerrace(ctx context.Context, bin, dir, database, runCLIConfig, smtpAddr string) (*Terrace, error) {
	dataDir := filepath.Join(dir, "data")
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ { // a free port can be taken before the server binds it
		if err := os.RemoveAll(dataDir); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, err
		}
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		t, err := startOnce(ctx, bin, dataDir, database, runCLIConfig, smtpAddr, port)
		if err == nil {
			return t, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startOnce(ctx context.Context, bin, dataDir, database, runCLIConfig, smtpAddr string, port int) (*Terrace, error) {
	t := &Terrace{
		URL:     fmt.Sprintf("https://localhost:%d", port),
		CAFile:  filepath.Join(dataDir, "tls", "ca.pem"),
		LogFile: filepath.Join(filepath.Dir(dataDir), "server.log"),
		done:    make(chan error, 1),
	}
	log, err := os.Create(t.LogFile)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	// go-tfe's TestIPRangesRead wants each list of GET
	// /api/meta/ip-ranges non-empty: the server declares its own
	// loopback, where both its clients and its connections are here.
	args := []string{"server", "--data-dir", dataDir, "--addr", fmt.Sprintf("127.0.0.1:%d", port),
		"--api-cidrs", "127.0.0.1/32", "--egress-cidrs", "127.0.0.1/32"}
	if database != "" {
		args = append(args, "--database", database)
	}
	if runCLIConfig != "" {
		args = append(args, "--run-cli-config", runCLIConfig)
	}
	if smtpAddr != "" {
		args = append(args, "--smtp-addr", smtpAddr)
	}
	t.cmd = exec.Command(bin, args...)
	// A developer's settings must not leak in. Every document the server
	// writes is also written by hashicorp/jsonapi and compared (a
	// difference panics: the request fails and server.log says how).
	t.cmd.Env = append(withoutPrefixes(os.Environ(), "TERRACE_"), tfeapi.CheckEnv+"=1")
	t.cmd.Stdout, t.cmd.Stderr = log, log
	if err := t.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting terrace: %w", err)
	}
	go func() { t.done <- t.cmd.Wait() }()

	deadline := time.Now().Add(60 * time.Second)
	var client *http.Client
	for {
		select {
		case err := <-t.done:
			t.done <- err
			return nil, fmt.Errorf("terrace exited before it was ready (%v):\n%s", err, tail(readFile(t.LogFile), 30))
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Stop()
			return nil, fmt.Errorf("terrace did not answer %s/healthz within 60s:\n%s", t.URL, tail(readFile(t.LogFile), 30))
		}
		if client == nil {
			pem, err := os.ReadFile(t.CAFile)
			if err != nil {
				continue // not written yet
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM(pem) {
				continue
			}
			client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
		}
		resp, err := client.Get(t.URL + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "site-token"))
	if err != nil {
		t.Stop()
		return nil, fmt.Errorf("reading the site token: %w", err)
	}
	t.Token = strings.TrimSpace(string(tok))
	return t, nil
}

// Stop shuts the server down (SIGTERM, then a kill after 20s).
func (t *Terrace) Stop() error {
	if t.cmd == nil || t.cmd.Process == nil {
		return nil
	}
	_ = t.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-t.done:
		t.done <- err
		var ee *exec.ExitError
		if errors.As(err, &ee) && !ee.Exited() { // killed by our signal
			return nil
		}
		return err
	case <-time.After(20 * time.Second):
		_ = t.cmd.Process.Kill()
		return errors.New("terrace did not stop within 20s of SIGTERM; killed")
	}
}

// Alive reports whether the server process is still running.
func (t *Terrace) Alive() bool {
	select {
	case err := <-t.done:
		t.done <- err
		return false
	default:
		return true
	}
}

// postgresDatabase returns the URL of a new, empty PostgreSQL database and
// a function that drops it (and stops the server if one was started). It
// uses the server named by TERRACE_TEST_POSTGRES, or starts a throwaway one
// with the PostgreSQL binaries on PATH, like the tests do.
func postgresDatabase(ctx context.Context) (string, func(), error) {
	admin := os.Getenv(storetest.EnvPostgres)
	stopServer := func() {}
	if admin == "" {
		var err error
		admin, stopServer, err = storetest.StartPostgres()
		if err != nil {
			return "", nil, fmt.Errorf("starting PostgreSQL: %w", err)
		}
	}
	name := "conformance_" + strings.ToLower(core.RandomString(10))
	db, err := sql.Open("pgx", admin)
	if err != nil {
		stopServer()
		return "", nil, err
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		db.Close()
		stopServer()
		return "", nil, fmt.Errorf("creating database: %w", err)
	}
	u, err := url.Parse(admin)
	if err != nil {
		db.Close()
		stopServer()
		return "", nil, err
	}
	u.Path = "/" + name
	return u.String(), func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		db.Close()
		stopServer()
	}, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// withoutPrefixes drops environment entries whose names start with any of
// the prefixes.
func withoutPrefixes(env []string, prefixes ...string) []string {
	var out []string
outer:
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				continue outer
			}
		}
		out = append(out, kv)
	}
	return out
}
