package storetest

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/store"
)

// Stores names the stores every domain query runs on.
var Stores = []string{"sqlite", "postgres"}

// DSN returns a new, empty database of the named store ("sqlite" or
// "postgres") for t.
func DSN(t testing.TB, name string) string {
	t.Helper()
	if name == "postgres" {
		return PostgresDSN(t)
	}
	return SQLiteDSN(t)
}

// ForEachDB runs fn, in parallel subtests named after the stores, on a
// new migrated database of each store (closed when the subtest ends).
func ForEachDB(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	for _, name := range Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, err := store.Open(context.Background(), DSN(t, name))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			fn(t, db)
		})
	}
}
