package tfeapi

import (
	"context"
	"net/http"
)

// Matching a request against the API's ServeMux (a tree of some hundreds
// of patterns) is done by each layer that needs the route: the audit
// recorder, the authorization guard, and the mux itself when it serves.
// The first layer to match remembers the pattern in the request's context
// (WithRoute) and the next one finds it there (Route).

type routeKey struct{}

type route struct {
	mux     *http.ServeMux
	pattern string
}

// WithRoute returns ctx remembering that a request matched pattern in mux.
func WithRoute(ctx context.Context, mux *http.ServeMux, pattern string) context.Context {
	return context.WithValue(ctx, routeKey{}, route{mux, pattern})
}

// Route returns the pattern r matches in mux, as mux.Handler says it:
// remembered by WithRoute when an earlier layer matched it, else matched
// now.
func Route(r *http.Request, mux *http.ServeMux) string {
	if rt, ok := r.Context().Value(routeKey{}).(route); ok && rt.mux == mux {
		return rt.pattern
	}
	_, pattern := mux.Handler(r)
	return pattern
}

// RouteOf returns the pattern an earlier layer remembered for the request
// whose context ctx is (WithRoute), or "": for a domain service that reads
// more in one statement when it knows what the request will render.
func RouteOf(ctx context.Context) string {
	rt, _ := ctx.Value(routeKey{}).(route)
	return rt.pattern
}

// Located is the organization and workspace the authorization guard
// found a request acting on ("" where it names none), for a layer around
// the guard that asked for it (WithLocated): the audit recorder, for a
// request whose route names no organization.
type Located struct {
	Organization, WorkspaceID string
}

type locatedKey struct{}

// WithLocated returns ctx with room for what the guard will find
// (NoteLocated); only the requests whose recorder needs it get it.
func WithLocated(ctx context.Context) context.Context {
	return context.WithValue(ctx, locatedKey{}, &Located{})
}

// NoteLocated records what the authorization guard found the request
// whose context ctx is acting on (nothing without WithLocated).
func NoteLocated(ctx context.Context, l Located) {
	if p, ok := ctx.Value(locatedKey{}).(*Located); ok {
		*p = l
	}
}

// LocatedOf returns what NoteLocated recorded for the request; ok is false
// when nothing was.
func LocatedOf(ctx context.Context) (l Located, ok bool) {
	p, _ := ctx.Value(locatedKey{}).(*Located)
	if p == nil || *p == (Located{}) {
		return Located{}, false
	}
	return *p, true
}
