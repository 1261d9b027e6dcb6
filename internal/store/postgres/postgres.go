// Package postgres is the PostgreSQL driver for the store (pgx through
// database/sql).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
)

// Driver implements store.Driver for PostgreSQL.
type Driver struct{}

// Name returns "postgres".
func (Driver) Name() string { return "postgres" }

// Rebind rewrites '?' placeholders to $1, $2, … (queries never carry '?' in literals).
func (Driver) Rebind(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(q[i])
	}
	return b.String()
}

// IsUniqueViolation reports SQLSTATE 23505.
func (Driver) IsUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505"
}

// Open connects to the server named by the URL.
func (Driver) Open(ctx context.Context, dsn string) (*sql.DB, *sql.DB, error) {
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, nil, err
	}
	db.SetMaxOpenConns(32)
	// Keep every connection when idle: with fewer idle slots than open
	// connections, a burst of concurrent requests closes connections it
	// needs again at once (a new backend and a cold statement cache each;
	// BenchmarkWorkspaceReadParallel reconnected ~90 times in 3s at 16).
	db.SetMaxIdleConns(32)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, db, nil
}
