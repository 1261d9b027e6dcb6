package signin

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// The attempt limiter on both stores: limits per key, two limiters on one
// store (two replicas) share counts, the previous window still weighs
// while it overlaps, and rows older than two windows are swept.
func TestAttemptLimiter(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		// A window starts at a multiple of its length (Unix time).
		clock := time.Unix(1_800_000_000-1_800_000_000%60, 0).Add(10 * time.Second)
		now := func() time.Time { return clock }
		a := &attemptLimiter{db: db, kind: "account", limit: 3, window: time.Minute, now: now}
		b := &attemptLimiter{db: db, kind: "account", limit: 3, window: time.Minute, now: now}
		allow := func(l *attemptLimiter, key string) bool {
			t.Helper()
			ok, wait, err := l.allow(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if !ok && wait < time.Second {
				t.Fatalf("a refusal says to wait %s", wait)
			}
			return ok
		}
		for i, l := range []*attemptLimiter{a, b, a} {
			if !allow(l, "mallory") {
				t.Fatalf("attempt %d refused under the limit", i+1)
			}
		}
		if allow(b, "mallory") || allow(a, "mallory") {
			t.Fatal("a fourth attempt on either replica was allowed")
		}
		if a.rejected.Load() != 1 || b.rejected.Load() != 1 {
			t.Fatalf("refusals counted: %d and %d, want 1 each", a.rejected.Load(), b.rejected.Load())
		}
		if !allow(a, "alice") {
			t.Fatal("another account is limited too")
		}
		addr := &attemptLimiter{db: db, kind: "address", limit: 3, window: time.Minute, now: now}
		if !allow(addr, "mallory") {
			t.Fatal("an address limiter shares counts with the account limiter")
		}
		// 50s into the next window 1/6 of the previous one (5
		// attempts) still counts: 5/6 + 1, 5/6 + 2 are allowed, and
		// 5/6 + 3 is over.
		clock = clock.Add(time.Minute + 40*time.Second)
		if !allow(a, "mallory") || !allow(b, "mallory") {
			t.Fatal("attempts refused once the window slid on")
		}
		if allow(a, "mallory") {
			t.Fatal("the previous window's attempts no longer count while it overlaps")
		}
		// Two windows later the first window's rows are gone.
		clock = clock.Add(2 * time.Minute)
		allow(a, "mallory")
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM signin_attempts WHERE window_start < ?`, clock.Add(-time.Minute-50*time.Second).UnixMicro()).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("%d rows of old windows were not swept", n)
		}
	})
}
