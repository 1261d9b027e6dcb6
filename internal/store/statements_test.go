package store_test

import (
	"context"
	"sync"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestStatementCount: a context's statement count holds every statement
// run with it, in a transaction or not, and none of those run at the same
// time with another context (a background loop's).
func TestStatementCount(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		if _, err := db.Exec(context.Background(), `CREATE TABLE counted (id TEXT PRIMARY KEY)`); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { // another piece of work, uncounted, all along
			for {
				select {
				case <-stop:
					return
				default:
				}
				var n int
				if err := db.QueryRow(context.Background(), `SELECT COUNT(*) FROM counted`).Scan(&n); err != nil {
					t.Error(err)
					return
				}
			}
		})
		ctx, count := core.WithStatementCount(context.Background())
		before := db.Queries()
		if _, err := db.Exec(ctx, `INSERT INTO counted (id) VALUES (?)`, "a"); err != nil {
			t.Fatal(err)
		}
		rows, err := db.Query(ctx, `SELECT id FROM counted`)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		err = db.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO counted (id) VALUES (?)`, "b"); err != nil {
				return err
			}
			var n int
			return tx.QueryRow(ctx, `SELECT COUNT(*) FROM counted`).Scan(&n)
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int
		if err := db.QueryRow(core.WithMemo(ctx), `SELECT COUNT(*) FROM counted`).Scan(&n); err != nil || n != 2 {
			t.Fatalf("rows: %d, %v", n, err)
		}
		close(stop)
		wg.Wait()
		if got := count(); got != 5 {
			t.Errorf("the context counted %d statements, want 5 (two outside a transaction, two in one, one through a derived context)", got)
		}
		if all := db.Queries() - before; all <= 3 {
			t.Errorf("the store's total grew by %d: the other work ran no statement, so the test shows nothing", all)
		}
	})
}
