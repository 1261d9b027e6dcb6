package server_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestRateLimitGoTFEPacesItself: the server sends X-RateLimit-Limit (on
// ping too, where go-tfe reads it) and answers a burst beyond the limit
// with 429 and X-RateLimit-Reset; a go-tfe client sending the same burst
// through its own limiter is never refused, because the limiter it built
// from the header spaces its requests.
func TestRateLimitGoTFEPacesItself(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.RateLimitPerToken = 10
		c.RateLimitPerAddress = -1
	}})
	ctx := context.Background()
	get := func(path, token string) *http.Response {
		req, _ := http.NewRequest(http.MethodGet, e.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	res := get("/api/v2/ping", "")
	res.Body.Close()
	if got := res.Header.Get("X-RateLimit-Limit"); got != "10" {
		t.Fatalf("ping X-RateLimit-Limit = %q, want 10", got)
	}

	// A burst without pacing: refused beyond the bucket, as HCP Terraform
	// refuses it.
	const burst = 30
	var wg sync.WaitGroup
	var refused atomic.Int64
	var sample atomic.Pointer[http.Response]
	var body atomic.Pointer[[]byte]
	for range burst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := get("/api/v2/organizations", e.Token)
			b, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusTooManyRequests {
				refused.Add(1)
				sample.Store(res)
				body.Store(&b)
			} else if res.StatusCode != http.StatusOK {
				t.Errorf("status %d: %s", res.StatusCode, b)
			}
		}()
	}
	wg.Wait()
	if refused.Load() == 0 {
		t.Fatalf("a burst of %d requests at a limit of 10/s was never refused", burst)
	}
	r429 := sample.Load()
	if r429.Header.Get("X-RateLimit-Limit") != "10" {
		t.Fatalf("429 X-RateLimit-Limit = %q", r429.Header.Get("X-RateLimit-Limit"))
	}
	if reset, err := strconv.ParseFloat(r429.Header.Get("X-RateLimit-Reset"), 64); err != nil || reset <= 0 {
		t.Fatalf("429 X-RateLimit-Reset = %q (%v), want seconds > 0", r429.Header.Get("X-RateLimit-Reset"), err)
	}
	var doc struct {
		Errors []struct{ Status, Detail string } `json:"errors"`
	}
	if err := json.Unmarshal(*body.Load(), &doc); err != nil || len(doc.Errors) != 1 || doc.Errors[0].Status != "429" {
		t.Fatalf("429 body is not a JSON:API error: %s", *body.Load())
	}

	// go-tfe with its own token (a fresh bucket): the same burst, paced by
	// the client, is never refused. (go-tfe would also retry a 429, so
	// success alone would prove nothing: the refusal count does.)
	if _, err := e.Client.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("acme"), Email: tfe.String("ops@acme.test")}); err != nil {
		t.Fatal(err)
	}
	ot, err := e.Client.OrganizationTokens.Create(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	c := e.NewClient(t, ot.Token)
	before := e.Server.TokenLimits.Rejected()
	errs := make(chan error, burst)
	for range burst {
		go func() {
			_, err := c.Workspaces.List(ctx, "acme", nil)
			errs <- err
		}()
	}
	for range burst {
		if err := <-errs; err != nil {
			t.Fatalf("go-tfe: %v", err)
		}
	}
	if n := e.Server.TokenLimits.Rejected() - before; n != 0 {
		t.Fatalf("go-tfe's requests were refused %d times: its limiter did not engage", n)
	}
}

// TestSlowClientsDoNotStopOthers: 100 connections that send their request
// header one byte a second (slow loris) are cut off by the header timeout
// and do not stop a normal client meanwhile.
func TestSlowClientsDoNotStopOthers(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.ReadHeaderTimeout = 2 * time.Second
	}})
	pem, err := os.ReadFile(e.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	host, _, _ := net.SplitHostPort(e.Host)
	addr := e.Opts.Addr

	ctx, stop := context.WithCancel(context.Background())
	const slow = 100
	var opened sync.WaitGroup
	opened.Add(slow)
	cut := make(chan struct{}, slow)
	var done sync.WaitGroup
	for range slow {
		done.Add(1)
		go func() {
			defer done.Done()
			first := true
			for ctx.Err() == nil {
				conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: host})
				if first {
					opened.Done()
					first = false
				}
				if err != nil {
					return
				}
				msg := []byte("GET /api/v2/ping HTTP/1.1\r\nHost: " + e.Host + "\r\nX-Slow: ")
			trickle:
				for i := 0; ctx.Err() == nil; i++ {
					if _, err := conn.Write(msg[i%len(msg) : i%len(msg)+1]); err != nil {
						break trickle
					}
					// The server answers 408 or closes once the header
					// timeout passes: either ends this connection.
					_ = conn.SetReadDeadline(time.Now().Add(time.Second))
					if _, err := conn.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
						select {
						case cut <- struct{}{}:
						default:
						}
						break trickle
					}
				}
				conn.Close()
			}
		}()
	}
	opened.Wait()
	// While they trickle: a normal client works.
	for i := range 20 {
		if _, err := e.Client.Organizations.List(context.Background(), nil); err != nil {
			t.Fatalf("request %d beside slow clients: %v", i, err)
		}
	}
	select {
	case <-cut: // the server cut at least one slow client off
	case <-time.After(time.Minute):
		t.Fatal("no slow client was cut off within a minute of a 2s header timeout")
	}
	stop()
	done.Wait()
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestRequestBodyCap: a body over the server-wide cap is refused with a
// JSON:API 413 before any handler reads it.
func TestRequestBodyCap(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) { c.MaxRequestBytes = 1 << 20 }})
	req, _ := http.NewRequest(http.MethodPost, e.URL+"/api/v2/organizations", bytes.NewReader(make([]byte, 2<<20)))
	req.Header.Set("Authorization", "Bearer "+e.Token)
	req.Header.Set("Content-Type", "application/vnd.api+json")
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestEntityTooLarge || !bytes.Contains(b, []byte(`"status":"413"`)) {
		t.Fatalf("2 MiB body at a 1 MiB cap: %d %s", res.StatusCode, b)
	}
}

// TestAPIResponseHeaders: an API request answered at once carries the
// headers HCP Terraform sends (the ones clients read: the rate limit and
// its reset, the API version, the application's name and version) with
// their values.
func TestAPIResponseHeaders(t *testing.T) {
	t.Parallel()
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.RateLimitPerToken = 50
		c.RateLimitPerAddress = -1
	}})
	req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/v2/organizations", nil)
	req.Header.Set("Authorization", "Bearer "+e.Token)
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := map[string]string{
		"X-RateLimit-Limit": "50", "X-RateLimit-Reset": "0.000", "TFP-API-Version": "2.6", "TFP-AppName": "Terraform Enterprise",
		"X-TFE-Version": "v202409-1", "X-TFE-Current-Version": server.Version,
	}
	for k, v := range want {
		if got := res.Header.Values(k); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
	}
}
