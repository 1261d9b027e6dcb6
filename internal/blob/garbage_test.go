package blob_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestRunAllSweepsEveryLedger: the one sweep loop goes through every
// ledger it is given, deletes their due blobs, keeps a blob whose time
// has not come, and ends with its context.
func TestRunAllSweepsEveryLedger(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		blobs, err := blob.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		var ledgers []blob.Garbage
		for _, table := range []string{"run_garbage", "stack_configuration_garbage"} {
			g := blob.Garbage{DB: db, Blobs: blobs, Table: table, What: table, Logger: slog.Default()}
			ledgers = append(ledgers, g)
			for key, due := range map[string]time.Time{table + "/due": time.Now().Add(-time.Second), table + "/later": time.Now().Add(time.Hour)} {
				if err := blobs.Put(ctx, key, []byte("x")); err != nil {
					t.Fatal(err)
				}
				if err := g.Add(ctx, db, key, due); err != nil {
					t.Fatal(err)
				}
			}
		}
		loopCtx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			blob.RunAll(loopCtx, 10*time.Millisecond, ledgers...)
		}()
		exists := func(key string) bool {
			ok, err := blobs.Exists(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		for deadline := time.Now().Add(10 * time.Second); exists("run_garbage/due") || exists("stack_configuration_garbage/due"); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the due blobs of both ledgers were not swept within 10 s")
			}
		}
		cancel()
		<-done
		for _, g := range ledgers {
			if !exists(g.Table + "/later") {
				t.Errorf("%s: a blob not yet due was swept", g.Table)
			}
		}
	})
}
