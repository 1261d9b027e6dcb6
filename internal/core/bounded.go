package core

import "sync"

// Bounded is a map of at most Max entries, safe for concurrent use, for
// remembering answers that depend on nothing but their key (a settings
// document's text, a token's hash), so that none can go stale: past Max
// it starts again empty. Copy, when set, is applied to a value on its way
// in and on its way out, so that no two callers share one (a value with
// pointers or slices in it).
type Bounded[K comparable, V any] struct {
	Max  int
	Copy func(V) V

	mu sync.Mutex
	m  map[K]V
}

// Get returns the value remembered for k.
func (b *Bounded[K, V]) Get(k K) (V, bool) {
	b.mu.Lock()
	v, ok := b.m[k]
	b.mu.Unlock()
	if ok && b.Copy != nil {
		v = b.Copy(v)
	}
	return v, ok
}

// Put remembers v for k.
func (b *Bounded[K, V]) Put(k K, v V) {
	if b.Copy != nil {
		v = b.Copy(v)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.m == nil || len(b.m) >= b.Max {
		b.m = make(map[K]V)
	}
	b.m[k] = v
}

// Forget drops what is remembered for k.
func (b *Bounded[K, V]) Forget(k K) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.m, k)
}
