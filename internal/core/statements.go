package core

import (
	"context"
	"sync/atomic"
)

// A statement count follows one piece of work (a request) through the
// store: every statement the store runs with a context carrying the count
// (in a transaction or not) adds one to it. Unlike the store's own total,
// it holds none of what other work did meanwhile (the server's background
// loops, other requests), so a request's cost can be read exactly even on
// a busy server: the metrics observe it by route, and tests assert it.
type statementKey struct{}

// WithStatementCount returns ctx counting the statements run with it (and
// with contexts made from it), and a function reading the count so far.
func WithStatementCount(ctx context.Context) (context.Context, func() int64) {
	n := new(atomic.Int64)
	return context.WithValue(ctx, statementKey{}, n), n.Load
}

// CountStatement adds one to ctx's statement count, if it has one: the
// store calls it for every statement it runs.
func CountStatement(ctx context.Context) {
	if n, _ := ctx.Value(statementKey{}).(*atomic.Int64); n != nil {
		n.Add(1)
	}
}
