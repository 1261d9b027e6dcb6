package storetest

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/store"
)

// Stores make a fresh database's DSN for each store, by name.
var Stores = map[string]func(testing.TB) string{"sqlite": SQLiteDSN, "postgres": PostgresDSN}

// EachStore runs fn as a parallel subtest per store, each with a fresh,
// migrated database that is closed when the subtest ends.
func EachStore(t *testing.T, fn func(t *testing.T, db *store.DB)) {
	t.Helper()
	for name, dsn := range Stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			db, err := store.Open(context.Background(), dsn(t))
			if err != nil {
				t.Fatalf("opening the %s store: %v", name, err)
			}
			t.Cleanup(func() { _ = db.Close() })
			fn(t, db)
		})
	}
}
