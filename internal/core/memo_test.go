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
