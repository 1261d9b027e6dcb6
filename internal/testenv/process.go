package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// TerraceBinary builds cmd/terrace once per test process and returns its
// path.
func TerraceBinary(t testing.TB) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "terrace-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "terrace")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/terracehq/terrace/cmd/terrace").CombinedOutput()
		if err != nil {
			buildErr = &buildError{out: string(out), err: err}
		}
	})
	if buildErr != nil {
		t.Fatalf("building terrace: %v", buildErr)
	}
	return binPath
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

// Process is a `terrace server` running as a separate process, so that
// tests can kill it without mercy. Its log is DataDir/server.log.
type Process struct {
	T        testing.TB
	DataDir  string
	Database string
	Addr     string
	Cmd      *exec.Cmd
	URL      string
	Token    string
	HTTP     *http.Client
	Client   *tfe.Client
}

// StartProcess starts `terrace server` on dataDir (database: "" for
// SQLite there; addr: "" for a free port) with extra flags, and waits
// until it is healthy. The process is killed when the test ends.
func StartProcess(t testing.TB, dataDir, database, addr string, extra ...string) *Process {
	t.Helper()
	if addr == "" {
		addr = freeAddr(t)
	}
	args := append([]string{"server", "--data-dir", dataDir, "--addr", addr, "--log-level", "warn"}, extra...)
	if database != "" {
		args = append(args, "--database", database)
	}
	cmd := exec.Command(TerraceBinary(t), args...)
	logf, err := os.OpenFile(filepath.Join(dataDir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &Process{T: t, DataDir: dataDir, Database: database, Addr: addr, Cmd: cmd}
	t.Cleanup(func() { p.Kill(); logf.Close() })
	_, port, _ := net.SplitHostPort(addr)
	p.URL = "https://localhost:" + port
	deadline := time.Now().Add(30 * time.Second)
	for {
		if pem, err := os.ReadFile(filepath.Join(dataDir, "tls", "ca.pem")); err == nil && p.HTTP == nil {
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			p.HTTP = &http.Client{Transport: tr, Timeout: time.Minute}
		}
		if p.HTTP != nil {
			if resp, err := p.HTTP.Get(p.URL + "/healthz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dataDir, "server.log"))
			t.Fatalf("terrace did not become healthy in 30s:\n%s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	tok, err := os.ReadFile(filepath.Join(dataDir, "site-token"))
	if err != nil {
		t.Fatal(err)
	}
	p.Token = strings.TrimSpace(string(tok))
	p.Client, err = tfe.NewClient(&tfe.Config{Address: p.URL, Token: p.Token, HTTPClient: p.HTTP})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Kill sends SIGKILL and waits for the process to go.
func (p *Process) Kill() {
	if p.Cmd.ProcessState != nil {
		return
	}
	_ = p.Cmd.Process.Kill()
	_, _ = p.Cmd.Process.Wait()
}

// Log returns what the process has logged so far.
func (p *Process) Log(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(p.DataDir, "server.log"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// AgentProcess is a `terrace agent` process; its log is the file Log.
type AgentProcess struct {
	Cmd *exec.Cmd
	Log string
}

// StartAgent starts `terrace agent` for p with an agent token (given in
// the environment, as an operator would) and a heartbeat of 500ms; extra
// flags come last (they win). It is killed when the test ends, and its
// log shown when the test failed.
func StartAgent(t testing.TB, p *Process, token, name string, extra ...string) *AgentProcess {
	t.Helper()
	return StartAgentIn(t, "", p, token, name, extra...)
}

// StartAgentIn is StartAgent with the agent's working folder dir ("": the
// test's), for flags that name files relative to it.
func StartAgentIn(t testing.TB, dir string, p *Process, token, name string, extra ...string) *AgentProcess {
	t.Helper()
	return startAgent(t, dir, nil, p, token, name, extra...)
}

// StartAgentEnv is StartAgent with env added to the agent's environment
// (HTTP_PROXY, for example), and to no other process's.
func StartAgentEnv(t testing.TB, env []string, p *Process, token, name string, extra ...string) *AgentProcess {
	t.Helper()
	return startAgent(t, "", env, p, token, name, extra...)
}

func startAgent(t testing.TB, dir string, env []string, p *Process, token, name string, extra ...string) *AgentProcess {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(TerraceBinary(t), "agent", "--address", p.URL, "--name", name,
		"--ca-file", filepath.Join(p.DataDir, "tls", "ca.pem"), "--heartbeat", "500ms")
	cmd.Args = append(cmd.Args, extra...)
	cmd.Env = append(append(os.Environ(), "TERRACE_AGENT_TOKEN="+token), env...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
		}
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("agent %s log:\n%s", name, b)
		}
	})
	return &AgentProcess{Cmd: cmd, Log: logPath}
}

// ErroredReason is the description of a run's last "errored" event (""
// when it has none).
func ErroredReason(ctx context.Context, t testing.TB, c *tfe.Client, runID string) string {
	t.Helper()
	events, err := c.RunEvents.List(ctx, runID, nil)
	if err != nil {
		t.Fatal(err)
	}
	why := ""
	for _, ev := range events.Items {
		if ev.Action == "errored" {
			why = ev.Description
		}
	}
	return why
}
