// Package sqlite is the embedded SQLite driver for the store (pure Go,
// modernc.org/sqlite). Writes go through a single connection so that writers
// queue in Go rather than fail with SQLITE_BUSY; reads use a pool under WAL.
package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

// Driver implements store.Driver for SQLite.
type Driver struct{}

// Name returns "sqlite".
func (Driver) Name() string { return "sqlite" }

// Rebind leaves '?' placeholders as they are.
func (Driver) Rebind(q string) string { return q }

// IsUniqueViolation reports a UNIQUE or PRIMARY KEY constraint failure.
func (Driver) IsUniqueViolation(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

// Open opens the database file at path (created if missing).
func (Driver) Open(ctx context.Context, path string) (*sql.DB, *sql.DB, error) {
	path = strings.TrimPrefix(path, "sqlite://")
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, nil, err
		}
	}
	q := url.Values{}
	for _, p := range []string{"journal_mode(WAL)", "busy_timeout(10000)", "foreign_keys(1)", "synchronous(NORMAL)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, nil, err
	}
	w.SetMaxOpenConns(1)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, nil, fmt.Errorf("opening %s: %w", path, err)
	}
	r, err := sql.Open("sqlite", dsn)
	if err != nil {
		w.Close()
		return nil, nil, err
	}
	r.SetMaxOpenConns(8)
	// Keep them all when idle (the default keeps 2), so concurrent reads
	// do not reopen connections and rerun the pragmas.
	r.SetMaxIdleConns(8)
	return w, r, nil
}
