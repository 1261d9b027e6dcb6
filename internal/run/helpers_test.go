package run

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// eachStore runs fn per store (parallel subtests) with a run service on a
// fresh database and blob folder.
func eachStore(t *testing.T, fn func(t *testing.T, ctx context.Context, db *store.DB, s *Service)) {
	t.Helper()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		blobs, err := blob.Open(ctx, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, ctx, db, NewService(Options{DB: db, Blobs: blobs}))
	})
}
