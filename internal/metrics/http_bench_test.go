package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkInstrument measures what the latency histogram adds to a
// request: the route lookup in the root and mounted muxes, the status
// writer and one histogram observation (compare with /bare).
func BenchmarkInstrument(b *testing.B) {
	api := http.NewServeMux()
	ok := func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }
	for _, p := range []string{"GET /api/v2/runs/{id}", "GET /api/v2/workspaces/{id}", "GET /api/v2/organizations/{org}/workspaces/{name}",
		"POST /api/v2/runs", "GET /api/v2/organizations/{org}/runs/queue", "/"} {
		api.HandleFunc(p, ok)
	}
	root := http.NewServeMux()
	root.Handle("/api/v2/", api)
	root.HandleFunc("GET /healthz", ok)
	m, err := New(Options{Access: AccessOpen})
	if err != nil {
		b.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/api/v2/organizations/acme/workspaces/app", nil)
	for _, c := range []struct {
		name string
		h    http.Handler
	}{{"bare", root}, {"instrumented", m.Instrument(root, root, map[string]*http.ServeMux{"/api/v2/": api})}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			w := httptest.NewRecorder()
			for b.Loop() {
				c.h.ServeHTTP(w, req)
			}
		})
	}
}
