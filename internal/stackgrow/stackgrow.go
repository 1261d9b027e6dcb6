// Package stackgrow grows a request's goroutine stack once, at the top of
// the handler, to the size the request would grow it to further down.
//
// The HTTP/2 server starts a goroutine for every request, with a small
// stack (the runtime's adaptive start: the average of the stacks it has
// scanned). A request to Terrace goes down through the middleware,
// authentication, the authorization model and the store to SQLite, whose
// translated C has large frames, and the runtime grows the stack there,
// some fifty frames down: it allocates a stack twice the size, copies the
// old one and walks every frame to adjust its pointers, looking each
// function up in the binary's tables. On go-tfe's Workspaces.Read (make
// bench, (e)) that copying was 3-4 % of the CPU time of the server and
// its clients together.
//
// Grown at the top, the same growth copies a few frames (under 1 % there),
// and the request's stack ends the same size: no request of (e) grew it
// again past Size.
package stackgrow

import "net/http"

// Size is how much free stack a request gets before its handler runs.
const Size = 8 << 10

// Handler grows the stack by Size, then calls next.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Grow()
		next.ServeHTTP(w, r)
	})
}

// Grow makes sure the calling goroutine has Size bytes of stack free.
//
// grow's frame holds a Size array, so its prologue asks for that much
// stack; the array is declared in a branch no call takes, so nothing is
// written to it. A stack with room already costs a comparison.
func Grow() { grow(false) }

//go:noinline
func grow(touch bool) byte {
	if touch {
		var frame [Size]byte
		return use(frame[:])
	}
	return 0
}

//go:noinline
func use(b []byte) byte { return b[len(b)-1] }
