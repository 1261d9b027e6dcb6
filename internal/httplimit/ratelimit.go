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
// with a burst of one second's worth. The rate may change while requests
// are served (SetRate: the site's settings change it); reading it costs a
// request one atomic load.
type RateLimiter struct {
	rate atomic.Pointer[limits]
	// idle is how long an unused bucket is kept (a full bucket is the
	// same as none).
	idle time.Duration

	mu        sync.Mutex
	buckets   map[string]*bucket
	lastSweep time.Time

	rejected atomic.Int64
}

// limits are a rate and what follows from it, made once per rate.
type limits struct {
	perSecond float64
	// limit is LimitHeader's value, formatted once.
	limit string
	burst int
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
	// of is the rate the bucket was made for.
	of *limits
}

// NewRateLimiter returns a limiter of perSecond requests a second per key;
// perSecond <= 0 allows everything.
func NewRateLimiter(perSecond float64) *RateLimiter {
	l := &RateLimiter{idle: time.Minute, buckets: map[string]*bucket{}}
	l.SetRate(perSecond)
	return l
}

// SetRate changes the rate to perSecond requests a second per key (<= 0:
// no limit) from the next request on. Keys start over with a full bucket
// of the new rate.
func (l *RateLimiter) SetRate(perSecond float64) {
	if perSecond < 0 {
		perSecond = 0
	}
	if cur := l.rate.Load(); cur != nil && cur.perSecond == perSecond {
		return
	}
	l.rate.Store(&limits{perSecond: perSecond, limit: strconv.FormatFloat(perSecond, 'f', -1, 64), burst: max(int(perSecond), 1)})
}

// Rate is the rate in force (0: no limit).
func (l *RateLimiter) Rate() float64 { return l.rate.Load().perSecond }

// Enabled reports whether the limiter limits anything.
func (l *RateLimiter) Enabled() bool { return l != nil && l.rate.Load().perSecond > 0 }

// LimitHeader is the X-RateLimit-Limit value.
func (l *RateLimiter) LimitHeader() string { return l.rate.Load().limit }

// Rejected counts the requests answered 429.
func (l *RateLimiter) Rejected() int64 { return l.rejected.Load() }

// take spends one token of key's bucket; when none is left it returns
// false and the wait until one is.
func (l *RateLimiter) take(lim *limits, key string, now time.Time) (bool, time.Duration) {
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
	if b == nil || b.of != lim {
		b = &bucket{lim: rate.NewLimiter(rate.Limit(lim.perSecond), lim.burst), of: lim}
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

// Handler limits next by key(r); a request whose key is "" passes, and
// every request while the rate is no limit. Every limited response carries
// X-RateLimit-Limit and X-RateLimit-Reset (the seconds until the next
// request would be allowed: 0 when it would be).
func (l *RateLimiter) Handler(key func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lim := l.rate.Load()
		if lim.perSecond <= 0 {
			next.ServeHTTP(w, r)
			return
		}
		k := key(r)
		if k == "" {
			next.ServeHTTP(w, r)
			return
		}
		ok, wait := l.take(lim, k, time.Now())
		h := w.Header()
		h[limitKey] = []string{lim.limit}
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
