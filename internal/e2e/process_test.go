package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
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

// terraceBinary builds cmd/terrace once per test process.
func terraceBinary(t *testing.T) string {
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

// proc is a terrace server running as a separate process, so that tests can
// kill it without mercy.
type proc struct {
	t        *testing.T
	dataDir  string
	database string
	addr     string
	cmd      *exec.Cmd
	URL      string
	Token    string
	HTTP     *http.Client
	Client   *tfe.Client
}

func startProc(t *testing.T, dataDir, database, addr string, extra ...string) *proc {
	t.Helper()
	if addr == "" {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr = ln.Addr().String()
		ln.Close()
	}
	args := append([]string{"server", "--data-dir", dataDir, "--addr", addr, "--log-level", "warn"}, extra...)
	if database != "" {
		args = append(args, "--database", database)
	}
	cmd := exec.Command(terraceBinary(t), args...)
	logf, err := os.OpenFile(filepath.Join(dataDir, "server.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, dataDir: dataDir, database: database, addr: addr, cmd: cmd}
	t.Cleanup(func() { p.kill(); logf.Close() })
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

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = p.cmd.Process.Kill()
	_, _ = p.cmd.Process.Wait()
}

// restart starts a new process on the same data, database and address.
func (p *proc) restart() *proc {
	p.kill()
	return startProc(p.t, p.dataDir, p.database, p.addr)
}

func mustCtx() context.Context { return context.Background() }

// killMidUpload starts a PUT of body to a capability upload URL, sends the
// first half, SIGKILLs the server while the rest is still to come, and
// fails the test if the server accepted the upload anyway.
func (p *proc) killMidUpload(t *testing.T, url string, body []byte) {
	t.Helper()
	pr, pw := io.Pipe()
	accepted := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPut, url, pr)
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := p.HTTP.Do(req)
		if err != nil {
			accepted <- 0
			return
		}
		resp.Body.Close()
		accepted <- resp.StatusCode
	}()
	if _, err := pw.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	// Give the server a moment to be in the middle of reading the body.
	time.Sleep(200 * time.Millisecond)
	p.kill()
	pw.CloseWithError(io.ErrUnexpectedEOF)
	if code := <-accepted; code > 0 && code < 300 {
		t.Fatalf("a half-sent upload was accepted with %d", code)
	}
}
