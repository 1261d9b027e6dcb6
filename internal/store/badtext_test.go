package store_test

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestTextTheDatabaseCannotHold: on PostgreSQL a text with a NUL is
// refused by the database; the store answers with an invalid-input error
// (a 422 through the API), not a server error, in and out of a
// transaction, and nothing is written. SQLite keeps it.
func TestTextTheDatabaseCannotHold(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `CREATE TABLE notes (id TEXT PRIMARY KEY, body TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		outside := func() error {
			_, err := db.Exec(ctx, `INSERT INTO notes (id, body) VALUES (?, ?)`, "a", "x\x00y")
			return err
		}
		inside := func() error {
			return db.Tx(ctx, func(tx *store.Tx) error {
				_, err := tx.Exec(ctx, `INSERT INTO notes (id, body) VALUES (?, ?)`, "b", "x\x00y")
				return err
			})
		}
		want := 0
		for name, write := range map[string]func() error{"outside a transaction": outside, "in a transaction": inside} {
			err := write()
			switch db.Driver().Name() {
			case "postgres":
				if core.KindOf(err) != core.KindInvalid {
					t.Errorf("%s: %v (%v), want an invalid-input error", name, err, core.KindOf(err))
				}
			default:
				if err != nil {
					t.Errorf("%s: %v, want it kept", name, err)
				}
				want++
			}
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM notes`).Scan(&n); err != nil || n != want {
			t.Fatalf("notes written: %d (%v), want %d", n, err, want)
		}

		// A single-row read given such a text (an ID from a form) is bad
		// input too, on the reader pool and in a transaction: on SQLite it
		// finds nothing.
		var body string
		reads := map[string]func() error{
			"a read":       func() error { return db.QueryRow(ctx, `SELECT body FROM notes WHERE id = ?`, "a\x00").Scan(&body) },
			"a read's Err": func() error { return db.QueryRow(ctx, `SELECT body FROM notes WHERE id = ?`, "a\x00").Err() },
			"a read in a transaction": func() error {
				return db.Tx(ctx, func(tx *store.Tx) error {
					return tx.QueryRow(ctx, `SELECT body FROM notes WHERE id = ?`, "a\x00").Scan(&body)
				})
			},
		}
		for name, read := range reads {
			err := read()
			switch db.Driver().Name() {
			case "postgres":
				if core.KindOf(err) != core.KindInvalid {
					t.Errorf("%s: %v (%v), want an invalid-input error", name, err, core.KindOf(err))
				}
			default:
				if err != nil && !store.IsNoRows(err) {
					t.Errorf("%s: %v, want no row", name, err)
				}
			}
		}
	})
}
