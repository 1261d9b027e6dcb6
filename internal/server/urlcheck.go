package server

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// refuseUnprintableURLs answers a request whose path or query holds a
// control character or bytes that are not UTF-8 with a 400, before any
// handler: no name, ID or search Terrace keeps or answers holds one, and
// PostgreSQL refuses such text in a statement (each was a 500 there, a
// 404 on SQLite).
func refuseUnprintableURLs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unprintable(r.URL.Path) || unprintableQuery(r.URL.RawQuery) {
			tfeapi.Error(w, r, core.BadRequest("the URL holds a control character or bytes that are not UTF-8, which no name, ID or search can hold"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func unprintable(s string) bool {
	return !utf8.ValidString(s) || strings.IndexFunc(s, unicode.IsControl) >= 0
}

// unprintableQuery checks the query's keys and values as decoded; a query
// that does not decode is left to the handlers, as before. Only a
// percent-escape decodes to something other than itself (or '+' to a
// space), so a query without one is checked as it is, without decoding it
// into a map on every request.
func unprintableQuery(raw string) bool {
	if !strings.Contains(raw, "%") {
		return unprintable(raw)
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return false
	}
	for k, vs := range q {
		if unprintable(k) {
			return true
		}
		for _, v := range vs {
			if unprintable(v) {
				return true
			}
		}
	}
	return false
}
