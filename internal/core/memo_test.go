package core_test

import (
	"context"
	"errors"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

func TestMemoize(t *testing.T) {
	calls := 0
	load := func() (int, error) { calls++; return calls, nil }

	// Without a memo every call loads.
	ctx := context.Background()
	a, _ := core.Memoize(ctx, "k", load)
	b, _ := core.Memoize(ctx, "k", load)
	if a != 1 || b != 2 {
		t.Fatalf("without a memo: %d, %d; want 1, 2", a, b)
	}

	// With one, a key loads once; another key loads on its own.
	calls = 0
	ctx = core.WithMemo(ctx)
	a, _ = core.Memoize(ctx, "k", load)
	b, _ = core.Memoize(ctx, "k", load)
	c, _ := core.Memoize(ctx, "other", load)
	if a != 1 || b != 1 || c != 2 {
		t.Fatalf("with a memo: %d, %d, %d; want 1, 1, 2", a, b, c)
	}

	// Errors are not remembered.
	fail := errors.New("store down")
	n := 0
	flaky := func() (string, error) {
		n++
		if n == 1 {
			return "", fail
		}
		return "ok", nil
	}
	if _, err := core.Memoize(ctx, "flaky", flaky); !errors.Is(err, fail) {
		t.Fatalf("first load: %v, want the error", err)
	}
	if v, err := core.Memoize(ctx, "flaky", flaky); err != nil || v != "ok" || n != 2 {
		t.Fatalf("after an error: %q, %v, %d loads; want a fresh load", v, err, n)
	}
	// A fresh memo (the next request) starts empty.
	if v, _ := core.Memoize(core.WithMemo(context.Background()), "k", load); v != 3 {
		t.Fatalf("a new memo gave %d, want a fresh load (3)", v)
	}
}

// TestWithoutMemo: a request that follows rows as they change reads them
// afresh every time, whatever its memo holds.
func TestWithoutMemo(t *testing.T) {
	calls := 0
	load := func() (int, error) { calls++; return calls, nil }
	ctx := core.WithMemo(context.Background())
	if a, _ := core.Memoize(ctx, "k", load); a != 1 {
		t.Fatalf("first load: %d", a)
	}
	free := core.WithoutMemo(ctx)
	a, _ := core.Memoize(free, "k", load)
	b, _ := core.Memoize(free, "k", load)
	if a != 2 || b != 3 {
		t.Fatalf("without the memo: %d, %d; want 2, 3 (a load each)", a, b)
	}
	if core.HasMemo(free) {
		t.Error("HasMemo says a context without its memo has one")
	}
	if v, _ := core.Memoize(ctx, "k", load); v != 1 {
		t.Errorf("the request's own memo gave %d after reads without it, want what it kept (1)", v)
	}
}

func TestMemoUntilWrite(t *testing.T) {
	calls := 0
	load := func() (int, error) { calls++; return calls, nil }

	ctx := core.WithMemoUntilWrite(context.Background())
	if core.HasMemo(ctx) {
		t.Fatal("a memo for a request that may write says it is read-only: the domains would read documents nobody renders")
	}
	// Before the first write, reads are shared.
	a, _ := core.Memoize(ctx, "k", load)
	b, _ := core.Memoize(ctx, "k", load)
	if a != 1 || b != 1 {
		t.Fatalf("before a write: %d, %d; want 1, 1", a, b)
	}
	core.Remember(ctx, "r", "kept")
	if v, ok := core.Recall[string](ctx, "r"); !ok || v != "kept" {
		t.Fatalf("before a write, Recall gave %q, %v", v, ok)
	}

	// The write: what was read before is forgotten, and nothing read after
	// it is kept.
	core.Wrote(ctx)
	c, _ := core.Memoize(ctx, "k", load)
	d, _ := core.Memoize(ctx, "k", load)
	if c != 2 || d != 3 {
		t.Fatalf("after a write: %d, %d; want fresh loads 2, 3", c, d)
	}
	if _, ok := core.Recall[string](ctx, "r"); ok {
		t.Fatal("Recall answered with what was remembered before the write")
	}
	core.Remember(ctx, "r2", "late")
	if _, ok := core.Recall[string](ctx, "r2"); ok {
		t.Fatal("Remember kept a value after the write")
	}
}

func TestMemoLoadOverlappingWrite(t *testing.T) {
	// A load under way when the request writes may have read what the
	// write changes: it is not kept, on either kind of memo.
	for _, ctx := range []context.Context{core.WithMemo(context.Background()), core.WithMemoUntilWrite(context.Background())} {
		v, _ := core.Memoize(ctx, "k", func() (string, error) {
			core.Wrote(ctx) // the write begins while the load runs
			return "before", nil
		})
		if v != "before" {
			t.Fatalf("the load's own caller got %q", v)
		}
		again, _ := core.Memoize(ctx, "k", func() (string, error) { return "after", nil })
		if again != "after" {
			t.Fatalf("a read after the write got %q, want a fresh load", again)
		}
		if core.HasMemo(ctx) {
			t.Fatal("HasMemo after a write: a document remembered now would never be found")
		}
	}
}
