package tfeapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRoute: a request matches in a mux as mux.Handler says; once a layer
// remembered its route in that mux, the remembered one is answered; the
// memory of one mux says nothing of another.
func TestRoute(t *testing.T) {
	a, b := http.NewServeMux(), http.NewServeMux()
	nop := func(http.ResponseWriter, *http.Request) {}
	a.HandleFunc("GET /things/{id}", nop)
	b.HandleFunc("GET /things/{id...}", nop)
	r := httptest.NewRequest(http.MethodGet, "/things/x", nil)
	if got := Route(r, a); got != "GET /things/{id}" {
		t.Fatalf("Route in a = %q", got)
	}
	r = r.WithContext(WithRoute(r.Context(), a, "remembered"))
	if got := Route(r, a); got != "remembered" {
		t.Errorf("Route in a after WithRoute = %q, want the remembered pattern", got)
	}
	if got := Route(r, b); got != "GET /things/{id...}" {
		t.Errorf("Route in b = %q, want b's own match", got)
	}
}
