package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestTrustedProxiesKeyAddressLimits: behind a trusted proxy (the test
// client on loopback plays it) every client named in X-Forwarded-For has
// its own per-address bucket; a server that does not trust the peer keys
// every request by the peer, whatever the header says.
func TestTrustedProxiesKeyAddressLimits(t *testing.T) {
	t.Parallel()
	const limit = 3
	ping := func(e *testenv.Env, xff string) int {
		req, _ := http.NewRequest(http.MethodGet, e.URL+"/api/v2/ping", nil)
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		res, err := e.HTTP.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	// exhaust sends requests as one client until one is refused.
	exhaust := func(e *testenv.Env, xff string) {
		t.Helper()
		for i := 0; i < 10*limit; i++ {
			if ping(e, xff) == http.StatusTooManyRequests {
				return
			}
		}
		t.Fatalf("client %q was never refused at %d requests a second", xff, limit)
	}

	trusting := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.RateLimitPerAddress = limit
		c.TrustedProxies = []string{"127.0.0.0/8", "::1"}
	}})
	exhaust(trusting, "203.0.113.1")
	if got := ping(trusting, "203.0.113.2"); got != http.StatusNoContent {
		t.Errorf("a second client behind the trusted proxy got %d after the first one used up its bucket, want 204", got)
	}
	// A client cannot pick a fresh bucket by writing its own entry: the
	// proxy appends the real address, and that is what counts.
	if got := ping(trusting, "198.51.100.77, 203.0.113.1"); got != http.StatusTooManyRequests {
		t.Errorf("the refused client with a forged left entry got %d, want 429", got)
	}

	plain := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.RateLimitPerAddress = limit
	}})
	exhaust(plain, "203.0.113.1")
	if got := ping(plain, "203.0.113.2"); got != http.StatusTooManyRequests {
		t.Errorf("with no trusted proxies X-Forwarded-For chose the bucket (status %d, want 429)", got)
	}
}

// TestTrustedProxiesRefusesGarbage: a bad CIDR stops the server from
// starting with a message naming it.
func TestTrustedProxiesRefusesGarbage(t *testing.T) {
	t.Parallel()
	_, err := server.New(t.Context(), server.Config{DataDir: t.TempDir(), TrustedProxies: []string{"10.0.0.0/40"}})
	if err == nil {
		t.Fatal("server started with --trusted-proxies 10.0.0.0/40")
	}
	if want := "10.0.0.0/40"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q does not name %q", err, want)
	}
}
