package server

import (
	"net/http"

	"github.com/terracehq/terrace/internal/core"
)

// readMemo gives each read-only request a request memo (core.Memoize),
// so that the guard, the handler and the renderer share what they load.
// Requests that may change something get none: they always read the
// store.
func readMemo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			r = r.WithContext(core.WithMemo(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}
