// Package httplimit protects the HTTP server from greedy clients: token
// bucket rate limits keyed by token or by address, answered as HCP
// Terraform answers them (X-RateLimit-Limit, X-RateLimit-Reset, 429), and
// a cap on request bodies.
//
// go-tfe reads X-RateLimit-Limit from GET /api/v2/ping when a client is
// created and paces itself at two thirds of it (a third as burst); on a
// 429 it waits X-RateLimit-Reset seconds and retries.
package httplimit

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Header names, as HCP Terraform sends them.
const (
	HeaderLimit = "X-RateLimit-Limit"
	HeaderReset = "X-RateLimit-Reset"
)

// The header names as net/http keeps them (Header.Set canonicalizes a
// name on every call, a new string each time for these).
var (
	limitKey = http.CanonicalHeaderKey(HeaderLimit)
	resetKey = http.CanonicalHeaderKey(HeaderReset)
)

// RateLimiter keeps one token bucket per key: perSecond requests a second,
// with a burst of one second's worth.
type RateLimiter struct {
	perSecond float64
	// limit is LimitHeader's value, formatted once.
	limit string
	burst int
	// idle is how long an unused bucket is kept (a full bucket is the
	// same as none).
	idle time.Duration

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time

	rejected atomic.Int64
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// NewRateLimiter returns a limiter of perSecond requests a second per key;
// perSecond <= 0 allows everything.
func NewRateLimiter(perSecond float64) *RateLimiter {
	burst := int(perSecond)
	if burst < 1 {
		burst = 1
	}
	return &RateLimiter{perSecond: perSecond, limit: strconv.FormatFloat(perSecond, 'f', -1, 64), burst: burst, idle: time.Minute, buckets: map[string]*bucket{}}
}

// Enabled reports whether the limiter limits anything.
func (l *RateLimiter) Enabled() bool { return l != nil && l.perSecond > 0 }

// LimitHeader is the X-RateLimit-Limit value.
func (l *RateLimiter) LimitHeader() string { return l.limit }

// Rejected counts the requests answered 429.
func (l *RateLimiter) Rejected() int64 { return l.rejected.Load() }

// take spends one token of key's bucket; when none is left it returns
// false and the wait until one is.
func (l *RateLimiter) take(key string, now time.Time) (bool, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) > l.idle {
		for k, b := range l.buckets {
			if now.Sub(b.last) > l.idle {
				delete(l.buckets, k)
			}
		}
		l.lastSweep = now
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.perSecond), l.burst)}
		l.buckets[key] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// Handler limits next by key(r); a request whose key is "" passes. Every
// limited response carries X-RateLimit-Limit and X-RateLimit-Reset (the
// seconds until the next request would be allowed: 0 when it would be).
func (l *RateLimiter) Handler(key func(*http.Request) string, next http.Handler) http.Handler {
	if !l.Enabled() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k := key(r)
		if k == "" {
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := l.take(k, time.Now())
		h := w.Header()
		h[limitKey] = []string{l.limit}
		reset := "0.000" // as FormatFloat says no wait, unformatted on the way of every request
		if wait != 0 {
			reset = strconv.FormatFloat(wait.Seconds(), 'f', 3, 64)
		}
		h[resetKey] = []string{reset}
		if !ok {
			l.rejected.Add(1)
			TooMany(w, r, wait)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// TooMany answers 429 with Retry-After.
func TooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
	tfeapi.Error(w, r, &core.Error{Kind: core.KindTooManyRequests,
		Detail: "the rate limit was exceeded: retry after " + strconv.FormatFloat(wait.Seconds(), 'f', 3, 64) + " seconds (X-RateLimit-Reset)"})
}

// Address is the client's IP address, a key for per-address limits.
func Address(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// MaxBody caps every request body at limit bytes (handlers apply tighter
// limits of their own); reading past it fails and the server answers 413
// where the handler reports the error.
func MaxBody(limit int64, next http.Handler) http.Handler {
	if limit <= 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > limit {
			tfeapi.Error(w, r, &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)})
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = http.MaxBytesReader(w, r.Body, limit)
		}
		next.ServeHTTP(w, r)
	})
}
