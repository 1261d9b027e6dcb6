package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/store"
)

// Beside runs change in a transaction on db held open once it has
// written, starts act beside it, lets act run for a while (up to 300 ms:
// on PostgreSQL long enough for act to read what the open transaction has
// not committed, or to wait on its locks), commits, and returns act's
// error. It is how the tests of transactions that overlap show a lost
// update or a check made on rows another transaction is changing: on
// PostgreSQL act overlaps the open transaction; on SQLite, whose write
// transactions never overlap, act waits for it. A change that fails stops
// the test.
func Beside(t testing.TB, db *store.DB, change func(tx *store.Tx) error, act func() error) error {
	t.Helper()
	wrote, commit, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Tx(context.Background(), func(tx *store.Tx) error {
			if err := change(tx); err != nil {
				return err
			}
			close(wrote)
			<-commit
			return nil
		})
	}()
	select {
	case <-wrote:
	case err := <-done:
		t.Fatalf("the other transaction: %v", err)
	}
	acted := make(chan error, 1)
	go func() { acted <- act() }()
	select {
	case err := <-acted: // it did not wait for the other transaction
		acted <- err
	case <-time.After(300 * time.Millisecond):
	}
	close(commit)
	if err := <-done; err != nil {
		t.Fatalf("the other transaction: %v", err)
	}
	return <-acted
}

// Statements is a change for Beside: the statements given, each a query
// and its arguments, one after the other.
func Statements(stmts ...[]any) func(tx *store.Tx) error {
	return func(tx *store.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(context.Background(), s[0].(string), s[1:]...); err != nil {
				return err
			}
		}
		return nil
	}
}

// Seed runs the statements on db (each a query and its arguments, as
// Statements takes them) in one transaction, failing the test if one
// fails: the rows a test starts from.
func Seed(t testing.TB, db *store.DB, stmts ...[]any) {
	t.Helper()
	if err := db.Tx(context.Background(), Statements(stmts...)); err != nil {
		t.Fatalf("seeding the database: %v", err)
	}
}
