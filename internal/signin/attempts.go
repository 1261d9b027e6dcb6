package signin

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// attemptLimiter limits sign-in attempts per key with counts kept in the
// store (signin_attempts), so that every replica on one store shares
// them: an attacker spreading guesses over servers behind a load
// balancer gets no more than against one. Windows are fixed, and the
// previous window's count is weighed by the part of it still inside the
// sliding window (the usual sliding-window counter), so a burst at a
// window's edge does not double the limit.
type attemptLimiter struct {
	db       *store.DB
	kind     string // "account" or "address"
	limit    int
	window   time.Duration
	rejected atomic.Int64
	// now is the clock (core.Now when nil; tests move it).
	now func() time.Time
}

// allow counts one attempt for key and reports whether it is within the
// limit, and if not how long until one would be.
func (l *attemptLimiter) allow(ctx context.Context, key string) (bool, time.Duration, error) {
	now := core.Now()
	if l.now != nil {
		now = l.now()
	}
	w := l.window.Microseconds()
	nowUS := core.Micros(now)
	start := nowUS - nowUS%w
	h := hash(l.kind + ":" + key)
	var cur, prev int64
	err := l.db.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO signin_attempts (key_hash, window_start, attempts) VALUES (?, ?, 1)
			ON CONFLICT (key_hash, window_start) DO UPDATE SET attempts = signin_attempts.attempts + 1
			RETURNING attempts`, h, start).Scan(&cur); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `SELECT attempts FROM signin_attempts WHERE key_hash = ? AND window_start = ?`, h, start-w).Scan(&prev)
		if store.IsNoRows(err) {
			err = nil
		}
		return err
	})
	if err != nil {
		return false, 0, fmt.Errorf("counting a sign-in attempt: %w", err)
	}
	// Rows older than the previous window count for nothing any more.
	if _, err := l.db.Exec(ctx, `DELETE FROM signin_attempts WHERE window_start < ?`, start-w); err != nil {
		return false, 0, fmt.Errorf("sweeping old sign-in attempts: %w", err)
	}
	elapsed := nowUS - start
	weighted := float64(cur) + float64(prev)*float64(w-elapsed)/float64(w)
	if weighted <= float64(l.limit) {
		return true, 0, nil
	}
	l.rejected.Add(1)
	// The count falls as the previous window slides out, and resets when
	// the next one starts; waiting for the next window is always enough
	// when this one alone is over the limit.
	wait := time.Duration(w-elapsed) * time.Microsecond
	if cur <= int64(l.limit) && prev > 0 {
		// Enough of the previous window must slide out.
		excess := weighted - float64(l.limit)
		wait = time.Duration(excess / float64(prev) * float64(l.window))
	}
	return false, max(wait, time.Second), nil
}

// check counts an attempt for key: tooMany when it is over the limit.
func (l *attemptLimiter) check(ctx context.Context, key string) error {
	ok, wait, err := l.allow(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return tooMany{wait}
	}
	return nil
}
