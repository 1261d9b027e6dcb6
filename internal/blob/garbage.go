package blob

import (
	"context"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Garbage is a ledger of blobs to delete: a table (blob_key TEXT PRIMARY
// KEY, not_before BIGINT) in which a domain records a blob when nothing
// will point at it any more (or, for an upload in progress, when a crash
// would leave it behind). Recording happens in the same transaction as the
// change that orphans the blob, so a rolled-back change loses nothing;
// the blob itself is deleted afterwards, at once by Collect or later by
// Sweep.
type Garbage struct {
	DB     *store.DB
	Blobs  *Store
	Table  string // e.g. "configuration_version_garbage"
	What   string // what the blobs are, for log lines ("configuration archive")
	Logger *slog.Logger
}

// Add records key for deletion no earlier than notBefore ("" is ignored).
func (g Garbage) Add(ctx context.Context, q store.Q, key string, notBefore time.Time) error {
	if key == "" {
		return nil
	}
	_, err := q.Exec(ctx, `INSERT INTO `+g.Table+` (blob_key, not_before) VALUES (?, ?) ON CONFLICT (blob_key) DO UPDATE SET not_before = excluded.not_before`, key, core.Micros(notBefore))
	return err
}

// Forget drops key from the ledger (the blob is in use after all).
func (g Garbage) Forget(ctx context.Context, q store.Q, key string) error {
	_, err := q.Exec(ctx, `DELETE FROM `+g.Table+` WHERE blob_key = ?`, key)
	return err
}

// Collect deletes the blob at key now and forgets it; on failure the
// ledger row stays for a later Sweep.
func (g Garbage) Collect(ctx context.Context, key string) {
	if key == "" {
		return
	}
	ctx = context.WithoutCancel(ctx)
	if err := g.Blobs.Delete(ctx, key); err != nil {
		g.Logger.WarnContext(ctx, "deleting "+g.What, "key", key, "error", err)
		return
	}
	if err := g.Forget(ctx, g.DB, key); err != nil {
		g.Logger.WarnContext(ctx, "forgetting deleted "+g.What, "key", key, "error", err)
	}
}

// Sweep deletes up to 500 recorded blobs that are due and returns how many
// it deleted.
func (g Garbage) Sweep(ctx context.Context) (int, error) {
	keys, err := store.Strings(ctx, g.DB, `SELECT blob_key FROM `+g.Table+` WHERE not_before <= ? ORDER BY not_before LIMIT 500`, core.Micros(core.Now()))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, k := range keys {
		if err := g.Blobs.Delete(ctx, k); err != nil {
			return n, err
		}
		if err := g.Forget(ctx, g.DB, k); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// RunAll sweeps the ledgers, one after another, every interval until ctx
// ends: one loop for every domain's ledger.
func RunAll(ctx context.Context, interval time.Duration, ledgers ...Garbage) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for _, g := range ledgers {
			if _, err := g.Sweep(ctx); err != nil && ctx.Err() == nil {
				g.Logger.WarnContext(ctx, "sweeping "+g.What+"s", "error", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
