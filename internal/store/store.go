// Package store is Terrace's database layer: one DB type over two drivers
// (SQLite, the embedded default, and PostgreSQL), embedded migrations applied
// at start, and explicit transactions.
//
// Domain packages write portable SQL with '?' placeholders against the Q
// interface; the driver rewrites placeholders and classifies its errors.
// Timestamps are stored as BIGINT Unix microseconds and JSON as TEXT so the
// same schema and queries serve both databases.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/postgres"
	"github.com/terracehq/terrace/internal/store/sqlite"
)

// Driver is what differs between the databases Terrace supports.
type Driver interface {
	// Name is "sqlite" or "postgres".
	Name() string
	// Rebind rewrites '?' placeholders into the driver's own form.
	Rebind(query string) string
	// IsUniqueViolation reports whether err is a unique-constraint violation.
	IsUniqueViolation(err error) bool
	// IsBadText reports whether err refused a text the database cannot
	// hold (PostgreSQL: a NUL, or bytes that are not UTF-8).
	IsBadText(err error) bool
	// IsCollision reports whether err is the database aborting a
	// transaction for another that overlapped it (a deadlock): nothing of
	// it was kept, and the same request may succeed when sent again.
	IsCollision(err error) bool
	// Open returns a pool for writes and a pool for reads (possibly the same).
	Open(ctx context.Context, dsn string) (writer, reader *sql.DB, err error)
}

// Q runs queries; *DB and *Tx both satisfy it, so store functions take a Q
// and work inside or outside a transaction.
type Q interface {
	Exec(ctx context.Context, query string, args ...any) (sql.Result, error)
	Query(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Driver returns the driver behind the connection.
	Driver() Driver
}

// DB is an open database.
type DB struct {
	driver Driver
	w, r   *sql.DB
	// wc and rc cache prepared statements of the writer and reader pools
	// (SQLite only; nil otherwise, see stmtCache).
	wc, rc *stmtCache
	// queries counts the statements run outside transactions (Exec, Query,
	// QueryRow), whoever ran them, for benchmarks that count round trips;
	// one piece of work's own statements are counted in its context
	// (core.WithStatementCount).
	queries atomic.Int64
	// local holds the in-process listeners of Notify (cluster.go).
	localOnce sync.Once
	local     *local
	// guard reports queries on the DB made inside its own transactions
	// (txguard.go); nil when off.
	guard *txGuard
}

// Open opens the database named by dsn: a postgres:// or postgresql:// URL
// selects PostgreSQL, anything else is a SQLite file path. Migrations are
// applied before Open returns.
func Open(ctx context.Context, dsn string) (*DB, error) {
	var d Driver
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		d = postgres.Driver{}
	} else {
		d = sqlite.Driver{}
	}
	w, r, err := d.Open(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("opening %s database: %w", d.Name(), err)
	}
	db := &DB{driver: d, w: w, r: r}
	if txGuardOn() {
		db.guard = &txGuard{}
	}
	if d.Name() == "sqlite" {
		db.wc, db.rc = newStmtCache(w), newStmtCache(r)
	}
	if err := migrate(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrating %s database: %w", d.Name(), err)
	}
	return db, nil
}

// Close closes the pools.
func (db *DB) Close() error {
	if db.wc != nil {
		db.wc.close()
		db.rc.close()
	}
	err := db.w.Close()
	if db.r != db.w {
		err = errors.Join(err, db.r.Close())
	}
	return err
}

// Driver returns the database driver.
func (db *DB) Driver() Driver { return db.driver }

// Exec runs a statement on the writer pool.
func (db *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	db.queries.Add(1)
	core.CountStatement(ctx)
	core.Wrote(ctx)
	if err := db.guard.checkQuery(query); err != nil {
		return nil, err
	}
	if db.wc != nil {
		return db.wc.exec(ctx, query, args)
	}
	res, err := db.w.ExecContext(ctx, db.driver.Rebind(query), args...)
	return res, badText(db.driver, err)
}

// ErrBadText is the answer to a text the database cannot hold.
var ErrBadText = core.Invalid("a text value holds a character the database cannot store (a NUL, another control character or bytes that are not UTF-8): remove it")

// IsBadText reports whether err is a database's refusal of a text it
// cannot hold (PostgreSQL: a NUL, or bytes that are not UTF-8), for an
// error that did not come through Exec, Query or QueryRow (a later row of
// a Query, whose error Rows.Next and Rows.Err return as the driver's).
func IsBadText(err error) bool { return err != nil && (postgres.Driver{}).IsBadText(err) }

// badText turns the database's refusal of a text it cannot hold (on
// PostgreSQL a NUL, or bytes that are not UTF-8) into a 422 that says so:
// the domains' checks should refuse such input first, but one a check
// missed is still bad input, not a server error, and nothing was written.
func badText(d Driver, err error) error {
	if err != nil && d.IsBadText(err) {
		return ErrBadText
	}
	return err
}

// Query runs a query on the reader pool.
func (db *DB) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	db.queries.Add(1)
	core.CountStatement(ctx)
	if writes(query) {
		core.Wrote(ctx)
	}
	if err := db.guard.checkQuery(query); err != nil {
		return nil, err
	}
	if db.rc != nil {
		return db.rc.query(ctx, query, args)
	}
	rows, err := db.r.QueryContext(ctx, db.driver.Rebind(query), args...)
	return rows, badText(db.driver, err)
}

// Row is the row of a single-row query: database/sql's, whose Scan and
// Err say a text the database cannot hold as Exec and Query do
// (ErrBadText, a 422), so that a read given such a text from a request
// (an ID in a form, a name in a body) is bad input wherever it is read,
// not a server error.
//
// A Row with err set is a query refused before it ran (the transaction
// guard's refusal): Scan and Err return err.
type Row struct {
	row    *sql.Row
	driver Driver
	err    error
}

// Scan copies the row's columns into dest; sql.ErrNoRows when there is
// no row (IsNoRows).
func (r Row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	return badText(r.driver, r.row.Scan(dest...))
}

// Err is the query's error, without scanning.
func (r Row) Err() error {
	if r.err != nil {
		return r.err
	}
	return badText(r.driver, r.row.Err())
}

// QueryRow runs a single-row query on the reader pool.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) Row {
	db.queries.Add(1)
	core.CountStatement(ctx)
	if writes(query) {
		core.Wrote(ctx)
	}
	if err := db.guard.checkQuery(query); err != nil {
		return Row{err: err}
	}
	if db.rc != nil {
		return Row{row: db.rc.queryRow(ctx, query, args), driver: db.driver}
	}
	return Row{row: db.r.QueryRowContext(ctx, db.driver.Rebind(query), args...), driver: db.driver}
}

// writes reports whether a statement given to Query or QueryRow may
// change something (an INSERT, UPDATE or DELETE, also inside a WITH), so
// that the request memo stops answering (core.Wrote): a plain SELECT
// costs a prefix test.
func writes(query string) bool {
	q := strings.TrimLeft(query, " \t\r\n")
	for strings.HasPrefix(q, "--") {
		if i := strings.IndexByte(q, '\n'); i >= 0 {
			q = strings.TrimLeft(q[i+1:], " \t\r\n")
		} else {
			return false
		}
	}
	if hasPrefixFold(q, "SELECT") {
		return false
	}
	if !hasPrefixFold(q, "WITH") {
		return true
	}
	u := strings.ToUpper(q)
	return hasWord(u, "INSERT") || hasWord(u, "UPDATE") || hasWord(u, "DELETE")
}

// hasWord reports whether word is in s as a word of its own (UPDATE, not
// the UPDATE of UPDATED_AT).
func hasWord(s, word string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !identChar(s[start-1])) && (end == len(s) || !identChar(s[end])) {
			return true
		}
		i = end
	}
}

func identChar(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z'
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// Queries returns how many statements the DB has run outside
// transactions since it was opened.
func (db *DB) Queries() int64 { return db.queries.Load() }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error { return db.r.PingContext(ctx) }

// Tx runs fn in a write transaction, committing when fn returns nil and
// rolling back otherwise.
//
// fn must reach the database only through tx: a query, a Notify or a nested
// Tx on db itself takes a second pooled connection while the transaction
// holds one, which deadlocks under load. With the guard on (txguard.go),
// such a call returns ErrConnInTx.
func (db *DB) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	core.Wrote(ctx)
	if db.guard != nil {
		leave, err := db.guard.enter("a nested DB.Tx")
		if err != nil {
			return err
		}
		defer leave()
	}
	stx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning transaction: %w", err)
	}
	tx := &Tx{tx: stx, driver: db.driver}
	if err := fn(tx); err != nil {
		_ = stx.Rollback()
		return collided(db.driver, err)
	}
	if err := stx.Commit(); err != nil {
		return collided(db.driver, fmt.Errorf("committing transaction: %w", err))
	}
	return nil
}

// collided turns the database's abort of a transaction for another that
// overlapped it (PostgreSQL's deadlock detector) into a 409 that says to
// send the request again: nothing of it was kept, and the other went on.
// It is still a sign of two transactions taking locks in different
// orders (docs/design/storage.md), so it is logged as a warning.
func collided(d Driver, err error) error {
	if core.KindOf(err) != core.KindInternal || !d.IsCollision(err) {
		return err
	}
	slog.Warn("a transaction was aborted for another that overlapped it", "error", err)
	return &core.Error{Kind: core.KindConflict, Detail: "this change met another made to the same data at the same moment and was undone so that the other could finish; nothing of it was kept: send it again", Err: err}
}

// Tx is a write transaction.
type Tx struct {
	tx     *sql.Tx
	driver Driver
}

// Driver returns the database driver.
func (tx *Tx) Driver() Driver { return tx.driver }

// Exec runs a statement in the transaction.
func (tx *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	core.CountStatement(ctx)
	res, err := tx.tx.ExecContext(ctx, tx.driver.Rebind(query), args...)
	return res, badText(tx.driver, err)
}

// Query runs a query in the transaction.
func (tx *Tx) Query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	core.CountStatement(ctx)
	rows, err := tx.tx.QueryContext(ctx, tx.driver.Rebind(query), args...)
	return rows, badText(tx.driver, err)
}

// QueryRow runs a single-row query in the transaction.
func (tx *Tx) QueryRow(ctx context.Context, query string, args ...any) Row {
	core.CountStatement(ctx)
	return Row{row: tx.tx.QueryRowContext(ctx, tx.driver.Rebind(query), args...), driver: tx.driver}
}

// IsUniqueViolation reports whether err came from a unique constraint.
func IsUniqueViolation(q Q, err error) bool { return err != nil && q.Driver().IsUniqueViolation(err) }

// IsNoRows reports whether err means a single-row query found nothing.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// ForUpdate is the row-locking suffix for a SELECT inside a transaction:
// " FOR UPDATE" on PostgreSQL, nothing on SQLite (whose write transactions
// already hold the database lock).
func ForUpdate(q Q) string {
	if q.Driver().Name() == "postgres" {
		return " FOR UPDATE"
	}
	return ""
}

// ForShare is ForUpdate for a read that only keeps the rows from being
// updated or deleted until the transaction ends: " FOR SHARE" on
// PostgreSQL, nothing on SQLite.
func ForShare(q Q) string {
	if q.Driver().Name() == "postgres" {
		return " FOR SHARE"
	}
	return ""
}

// Scanner reads one row: *sql.Row or *sql.Rows. (An alias, so that scan
// functions written against the bare interface fit.)
type Scanner = interface{ Scan(dest ...any) error }

// Strings runs a query of one text column and returns its values (empty,
// not nil, when there are none).
func Strings(ctx context.Context, q Q, query string, args ...any) ([]string, error) {
	out, err := All(ctx, q, func(s Scanner) (v string, err error) { err = s.Scan(&v); return v, err }, query, args...)
	if out == nil && err == nil {
		out = []string{}
	}
	return out, err
}

// All runs query and returns every row turned into a T by scan.
func All[T any](ctx context.Context, q Q, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := q.Query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
