package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/testenv"
)

// proc is a terrace server running as a separate process, so that tests can
// kill it without mercy (testenv.Process, with the names this package's
// tests use).
type proc struct {
	*testenv.Process
	t *testing.T
}

func startProc(t *testing.T, dataDir, database, addr string, extra ...string) *proc {
	t.Helper()
	p := testenv.StartProcess(t, dataDir, database, addr, extra...)
	return &proc{Process: p, t: t}
}

// kill sends SIGKILL and waits for the process to go.
func (p *proc) kill() { p.Kill() }

// restart starts a new process on the same data, database and address.
func (p *proc) restart() *proc {
	p.kill()
	return startProc(p.t, p.DataDir, p.Database, p.Addr)
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
