package store_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestTransactionsThatDeadlock: two transactions that each lock a row and
// then wait for the other's are a deadlock PostgreSQL breaks by aborting
// one; that one is answered as a conflict to send again (a 409, not a
// server error), nothing of it kept, and the other commits. SQLite never
// overlaps write transactions: both commit, one after the other.
func TestTransactionsThatDeadlock(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `CREATE TABLE pair (id TEXT PRIMARY KEY, n INTEGER NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO pair (id, n) VALUES ('a', 0), ('b', 0)`); err != nil {
			t.Fatal(err)
		}
		// Each takes its first row, waits until the other has taken its
		// own (on SQLite the second waits for the first to commit
		// instead), then takes the other's.
		var first sync.WaitGroup
		first.Add(2)
		postgres := db.Driver().Name() == "postgres"
		lockBoth := func(one, other string) error {
			return db.Tx(ctx, func(tx *store.Tx) error {
				if _, err := tx.Exec(ctx, `UPDATE pair SET n = n + 1 WHERE id = ?`, one); err != nil {
					return err
				}
				if postgres {
					first.Done()
					first.Wait()
				}
				_, err := tx.Exec(ctx, `UPDATE pair SET n = n + 10 WHERE id = ?`, other)
				return err
			})
		}
		errs := make(chan error, 2)
		go func() { errs <- lockBoth("a", "b") }()
		go func() { errs <- lockBoth("b", "a") }()
		var failed []error
		for range 2 {
			if err := <-errs; err != nil {
				failed = append(failed, err)
			}
		}
		var sum int
		if err := db.QueryRow(ctx, `SELECT SUM(n) FROM pair`).Scan(&sum); err != nil {
			t.Fatal(err)
		}
		if !postgres {
			if len(failed) != 0 || sum != 22 {
				t.Fatalf("on SQLite: %v, sum %d; want both committed (22)", failed, sum)
			}
			return
		}
		if len(failed) != 1 || core.KindOf(failed[0]) != core.KindConflict || !strings.Contains(failed[0].Error(), "send it again") {
			t.Fatalf("two transactions in a deadlock: %v; want one aborted as a conflict to send again", failed)
		}
		if sum != 11 {
			t.Fatalf("the rows sum to %d after the deadlock, want 11: the one that committed, nothing of the aborted", sum)
		}
	})
}
