package core

import (
	"context"
	"sync"
)

// A request memo remembers what a read-only request has already loaded,
// so that the authorization guard, the handler and the renderer looking
// up the same row (a workspace by name, a caller's teams) cost one store
// round trip instead of one each. It lives as long as the request's
// context and only on requests that change nothing (the server installs
// it for GET and HEAD), so a handler never reads its own stale write.
type memo struct {
	mu sync.Mutex
	m  map[string]any
}

type memoKey struct{}

// WithMemo returns ctx with an empty request memo.
func WithMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &memo{m: map[string]any{}})
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
	v, ok := m.m[key]
	m.mu.Unlock()
	if ok {
		return v.(T), nil
	}
	t, err := load()
	if err != nil {
		return t, err
	}
	m.mu.Lock()
	m.m[key] = t
	m.mu.Unlock()
	return t, nil
}

// Remember puts v under key in ctx's request memo (nothing without one):
// a list that loads its rows' details in one query remembers each row's
// share, and the per-row code that asks with Memoize finds it.
func Remember[T any](ctx context.Context, key string, v T) {
	m, _ := ctx.Value(memoKey{}).(*memo)
	if m == nil {
		return
	}
	m.mu.Lock()
	m.m[key] = v
	m.mu.Unlock()
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

// HasMemo reports whether ctx carries a request memo: whether what a
// caller remembers there can be found again.
func HasMemo(ctx context.Context) bool {
	m, _ := ctx.Value(memoKey{}).(*memo)
	return m != nil
}
