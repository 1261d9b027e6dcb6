// Package postgres is the PostgreSQL driver for the store (pgx through
// database/sql).
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
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

// IsBadText: 22021 (character_not_in_repertoire: a NUL, invalid UTF-8)
// and 22P05 (untranslatable_character).
func (Driver) IsBadText(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "22021" || pgErr.Code == "22P05")
}

// IsCollision: 40P01 (deadlock_detected: the server aborted this
// transaction to let another it waited on, and that waited on it, go on)
// and 40001 (serialization_failure).
func (Driver) IsCollision(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// pingAfter is how long a pooled connection may have been idle before it
// is pinged when taken again. pgx pings after one second: a round trip in
// front of the statement, which a run's first statements after each pause
// paid (its steps come a second or so apart: bench (a) counted 25 pings in
// 789 statements). A connection the server dropped while it idled fails
// its next statement instead of being replaced first, so the ping stays
// for connections idle long enough for that to be likely (a firewall's or
// the server's idle timeout); a server restart costs at most one failed
// statement per connection idle for less.
const pingAfter = 5 * time.Second

// Open connects to the server named by the URL.
func (Driver) Open(ctx context.Context, dsn string) (*sql.DB, *sql.DB, error) {
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(_ context.Context, p stdlib.ShouldPingParams) bool {
		return p.IdleDuration > pingAfter
	}))
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
