package core

import (
	"context"
	"sync"
)

// A request memo remembers what a request has already loaded, so that
// the authorization guard, the handler and the renderer looking up the
// same row (a workspace by name or ID, a run, a caller's teams) cost one
// store round trip instead of one each. It lives as long as the request's
// context, and only until the request's first write: the store calls
// Wrote before every statement that may change something (internal/store),
// and from then on the memo neither answers nor keeps anything, so a
// handler never reads its own stale write. A load that was under way when
// the write began is not kept either.
//
// A read-only request's memo (WithMemo: the server installs it for GET and
// HEAD) also tells the domains that the request will render what it reads
// (HasMemo), so they read a row's document with the row; a request that
// may write gets a memo for its reads before the write
// (WithMemoUntilWrite), which asks for nothing more than each read.
type memo struct {
	mu       sync.Mutex
	m        map[string]any // nil once the request has written
	readOnly bool
}

type memoKey struct{}

// WithMemo returns ctx with an empty request memo for a read-only request.
func WithMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{m: map[string]any{}, readOnly: true})
}

// WithMemoUntilWrite returns ctx with an empty request memo for a request
// that may write: it remembers what the request reads before its first
// write.
func WithMemoUntilWrite(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{m: map[string]any{}})
}

// WithoutMemo returns ctx without its request memo: for a request that
// reads the same rows again and again to follow them (a log streamed as
// it grows, a run's status until it ends), where a memo would answer the
// first read forever. It is meant for the rest of the request: reads
// through it neither find nor keep anything, and its writes leave the
// request's own memo as it is.
func WithoutMemo(ctx context.Context) context.Context {
	if m, _ := ctx.Value(memoKey{}).(*memo); m == nil {
		return ctx
	}
	return context.WithValue(ctx, memoKey{}, &memo{}) // as one that has seen a write
}

// Wrote tells ctx's request memo that the request is about to change the
// store: the memo forgets what it holds and remembers nothing more.
func Wrote(ctx context.Context) {
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil {
		return
	}
	m.mu.Lock()
	m.m = nil
	m.mu.Unlock()
}

// Memoize returns the value remembered under key in ctx's request memo,
// or calls load and remembers what it returns (errors are not
// remembered). Without a memo in ctx it just calls load. Keys are
// namespaced by the caller ("workspace:ws-…"); callers get the same value
// each time, so they return copies of anything a caller could change.
func Memoize[T any](ctx context.Context, key string, load func() (T, error)) (T, error) {
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil {
		return load()
	}
	m.mu.Lock()
	v, ok := m.m[key] // nil map after a write: not found
	m.mu.Unlock()
	if ok {
		return v.(T), nil
	}
	t, err := load()
	if err != nil {
		return t, err
	}
	m.keep(key, t)
	return t, nil
}

// keep puts v under key unless the request has written since its memo
// was made (v may then be older than the write).
func (m *memo) keep(key string, v any) {
	m.mu.Lock()
	if m.m != nil {
		m.m[key] = v
	}
	m.mu.Unlock()
}

// Remember puts v under key in ctx's request memo (nothing without one):
// a list that loads its rows' details in one query remembers each row's
// share, and the per-row code that asks with Memoize finds it.
func Remember[T any](ctx context.Context, key string, v T) {
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil {
		return
	}
	m.keep(key, v)
}

// Recall returns what Remember put under key in ctx's request memo, if
// anything of type T is there.
func Recall[T any](ctx context.Context, key string) (T, bool) {
	var zero T
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil {
		return zero, false
	}
	m.mu.Lock()
	v, ok := m.m[key]
	m.mu.Unlock()
	if !ok {
		return zero, false
	}
	t, ok := v.(T)
	return t, ok
}

// HasMemo reports whether ctx carries a read-only request's memo that has
// seen no write: whether what a caller remembers there for the rendering
// (a row's document read with the row) can be found again.
func HasMemo(ctx context.Context) bool {
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil || !m.readOnly {
		return false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m != nil
}
