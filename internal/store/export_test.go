package store

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/store/postgres"
	"github.com/terracehq/terrace/internal/store/sqlite"
)

// OpenUntil opens dsn like Open but applies only the migrations up to
// version, so that a test can put rows in the tables a later migration
// moves; Migrate applies the rest.
func OpenUntil(ctx context.Context, dsn, version string) (*DB, error) {
	var d Driver = sqlite.Driver{}
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		d = postgres.Driver{}
	}
	w, r, err := d.Open(ctx, dsn)
	if err != nil {
		return nil, err
	}
	db := &DB{driver: d, w: w, r: r}
	if txGuardOn() {
		db.guard = &txGuard{}
	}
	if err := migrateTo(ctx, db, version); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Migrate applies the migrations not yet applied.
func (db *DB) Migrate(ctx context.Context) error { return migrate(ctx, db) }
