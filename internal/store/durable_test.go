package store_test

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestSQLiteCommitsAreDurable holds SQLite's writer to synchronous=FULL:
// in WAL mode, NORMAL syncs the log only at checkpoints, so a committed
// state version (or a run's applied status) could be lost to a power
// failure after its client was told it was stored. PostgreSQL's default
// (synchronous_commit on) already waits for the disk.
func TestSQLiteCommitsAreDurable(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, storetest.SQLiteDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var level int
	if err := db.Tx(ctx, func(tx *store.Tx) error {
		return tx.QueryRow(ctx, `PRAGMA synchronous`).Scan(&level)
	}); err != nil {
		t.Fatal(err)
	}
	if level != 2 { // 0 OFF, 1 NORMAL, 2 FULL, 3 EXTRA
		t.Fatalf("the writer's synchronous level is %d, want 2 (FULL)", level)
	}
}
