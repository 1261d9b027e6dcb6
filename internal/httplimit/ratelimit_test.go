package httplimit

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRateLimiterSetRate: the rate changes under a running handler: a
// limiter made without a limit starts limiting, a lower rate refuses
// sooner (the keys' buckets start over at the new rate), and no limit
// again lets everything through without the limit headers.
func TestRateLimiterSetRate(t *testing.T) {
	t.Parallel()
	l := NewRateLimiter(-1)
	h := l.Handler(func(*http.Request) string { return "token" }, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	// burst sends n requests at once and returns how many passed and the
	// last X-RateLimit-Limit.
	burst := func(n int) (passed int, limit string) {
		for range n {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			if w.Code == http.StatusOK {
				passed++
			}
			limit = w.Header().Get(HeaderLimit)
		}
		return passed, limit
	}
	if passed, limit := burst(50); passed != 50 || limit != "" || l.Enabled() {
		t.Fatalf("no limit: %d of 50 passed, X-RateLimit-Limit %q, enabled %t", passed, limit, l.Enabled())
	}
	l.SetRate(10)
	if passed, limit := burst(50); passed < 10 || passed > 12 || limit != "10" || !l.Enabled() || l.LimitHeader() != "10" {
		t.Fatalf("at 10 a second: %d of 50 passed, X-RateLimit-Limit %q, enabled %t", passed, limit, l.Enabled())
	}
	l.SetRate(3)
	if passed, limit := burst(50); passed < 3 || passed > 4 || limit != "3" {
		t.Fatalf("at 3 a second: %d of 50 passed, X-RateLimit-Limit %q", passed, limit)
	}
	l.SetRate(0)
	if passed, limit := burst(50); passed != 50 || limit != "" || l.Enabled() || l.Rate() != 0 {
		t.Fatalf("no limit again: %d of 50 passed, X-RateLimit-Limit %q, enabled %t", passed, limit, l.Enabled())
	}
}
