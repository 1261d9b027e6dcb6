package metrics

import (
	"crypto/subtle"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// Unmatched is the route label of a request no pattern matched.
const Unmatched = "unmatched"

// Instrument measures every request next answers, labelled with its route
// and status class, and counts the store statements it ran (by route).
// root is the server's top mux; mounts maps a pattern of root that hands a
// whole prefix to another mux ("/api/v2/" → the API mux) to that mux,
// whose own pattern then names the route. A path no pattern matches is
// labelled with the prefix it fell under, or Unmatched: the label never
// carries a raw path.
func (m *Metrics) Instrument(next http.Handler, root *http.ServeMux, mounts map[string]*http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &statusWriter{ResponseWriter: w}
		ctx, statements := core.WithStatementCount(r.Context())
		r = r.WithContext(ctx) // the one root dispatches, whose Pattern routeOf reads
		defer m.inFlight.Dec() // last: a request no longer in flight has been observed
		defer func() {
			route := routeOf(r, root, mounts)
			class := statusClass(sw.status)
			m.statements.WithLabelValues(route).Observe(float64(statements()))
			if v := recover(); v != nil {
				m.requests.WithLabelValues(route, "5xx").Observe(time.Since(start).Seconds())
				panic(v)
			}
			m.requests.WithLabelValues(route, class).Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// routeOf names the route r took, once it has been served. The root mux
// records the pattern it matched in r.Pattern as it dispatches (the
// handlers in front of it pass r on as it is), so the route is not looked
// up a second time: only a mounted mux's own pattern is (its dispatch
// happens on a copy of r made by the middleware in front of it). A request
// answered before it reached root (a rate limit) is looked up in root.
func routeOf(r *http.Request, root *http.ServeMux, mounts map[string]*http.ServeMux) string {
	pattern := r.Pattern
	if pattern == "" {
		_, pattern = root.Handler(r)
	}
	if pattern == "" {
		return Unmatched
	}
	if inner, ok := mounts[pattern]; ok {
		// A mounted mux's catch-all ("/") is its prefix's "no such route".
		if _, p := inner.Handler(r); p != "" && p != "/" {
			return p
		}
	}
	return pattern
}

func statusClass(code int) string {
	switch {
	case code == 0:
		return "2xx" // nothing written: net/http answers 200
	case code < 200:
		return "1xx"
	case code < 300:
		return "2xx"
	case code < 400:
		return "3xx"
	case code < 500:
		return "4xx"
	}
	return "5xx"
}

// statusWriter remembers the status a handler wrote. Unwrap lets
// http.ResponseController reach the connection's own writer; Flush is kept
// for handlers that stream (run logs).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Handler serves the exposition (GET /metrics) to the callers Access
// allows: the store-derived figures are read first, one scrape at a time.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch m.o.Access {
		case AccessOff:
			tfeapi.Error(w, r, core.NotFound("metrics are turned off on this server"))
			return
		case AccessSiteAdmin:
			secret := bearer(r)
			if m.o.Token == "" || subtle.ConstantTimeCompare([]byte(secret), []byte(m.o.Token)) != 1 {
				if _, err := m.siteAdmin(r, secret); err != nil {
					tfeapi.Error(w, r, err)
					return
				}
			}
		}
		m.scrapeMu.Lock()
		defer m.scrapeMu.Unlock()
		m.refresh(r.Context())
		m.scrapeHandler.ServeHTTP(w, r)
	})
}

// Pprof serves net/http/pprof under /debug/pprof/ to site admins only; any
// other caller gets 404 (401 without a token), as the site-admin API does.
func (m *Metrics) Pprof() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := m.siteAdmin(r, bearer(r)); err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// siteAdmin authenticates secret and accepts only a site admin.
func (m *Metrics) siteAdmin(r *http.Request, secret string) (*auth.Principal, error) {
	if m.o.Auth == nil {
		return nil, core.NotFound("not found")
	}
	if secret == "" {
		return nil, core.Unauthorized("this endpoint needs a site admin's token in the Authorization header")
	}
	p, err := m.o.Auth.Authenticate(r.Context(), secret)
	if err != nil {
		return nil, err
	}
	if !p.SiteAdmin {
		return nil, core.NotFound("not found")
	}
	return p, nil
}

func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	secret, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		secret, _ = strings.CutPrefix(h, "bearer ")
	}
	return strings.TrimSpace(secret)
}
