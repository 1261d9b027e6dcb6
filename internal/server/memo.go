package server

import (
	"net/http"

	"github.com/terracehq/terrace/internal/core"
)

// readMemo gives each request a request memo (core.Memoize), so that the
// guard, the handler and the renderer share what they load: a read-only
// request's for all of it, and a request that may change something its
// reads up to its first write (the store ends the memo there, so the
// request reads its own writes from the store).
func readMemo(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			r = r.WithContext(core.WithMemo(r.Context()))
		} else {
			r = r.WithContext(core.WithMemoUntilWrite(r.Context()))
		}
		next.ServeHTTP(w, r)
	})
}
