package metrics

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// TestInstrumentRoutes: each request is counted under the pattern that
// served it — a root pattern, a mounted mux's pattern (reached through a
// middleware that copies the request, as authentication does), the
// mount's prefix for an unknown path under it, or unmatched — also when
// a handler in front of the root mux answers first.
func TestInstrumentRoutes(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v2/runs/{id}", ok)
	api.HandleFunc("/", http.NotFound)
	root := http.NewServeMux()
	root.HandleFunc("GET /healthz", ok)
	root.HandleFunc("GET /api/v2/ping", ok)
	root.Handle("/api/v2/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), mountedKey{}, 1)))
	}))
	// In front of root: refuses /limited before root sees it.
	front := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" && r.URL.RawQuery == "limited" {
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		root.ServeHTTP(w, r)
	})
	m, err := New(Options{Access: AccessOpen})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Instrument(front, root, map[string]*http.ServeMux{"/api/v2/": api})
	for _, c := range []struct{ path, route, class string }{
		{"/healthz", "GET /healthz", "2xx"},
		{"/healthz?limited", "GET /healthz", "4xx"},
		{"/api/v2/ping", "GET /api/v2/ping", "2xx"},
		{"/api/v2/runs/run-1", "GET /api/v2/runs/{id}", "2xx"},
		{"/api/v2/no-such", "/api/v2/", "4xx"},
		{"/no-such", Unmatched, "4xx"},
	} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", c.path, nil))
		var d dto.Metric
		if err := m.requests.WithLabelValues(c.route, c.class).(prometheus.Histogram).Write(&d); err != nil {
			t.Fatal(err)
		}
		if n := d.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("GET %s: %d requests counted under route %q %s, want 1", c.path, n, c.route, c.class)
		}
	}
}

// mountedKey marks a request that went through the mounted mux.
type mountedKey struct{}
