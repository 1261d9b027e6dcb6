package store

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStatements bounds the statement cache: queries are literal
// strings in the domain packages, so a few hundred cover every hot path;
// a query built at run time (an IN list of varying length) beyond the
// bound is prepared each time as before, never evicting the hot ones.
const maxCachedStatements = 256

// stmtCache keeps prepared statements of one pool by query text.
//
// SQLite's driver prepares (parses and plans) every statement it runs
// from scratch; under concurrent reads the parser was a quarter of the
// server's CPU. A *sql.Stmt is prepared lazily on each connection of the
// pool that runs it and kept there, so a cached query is parsed once per
// connection. PostgreSQL's driver (pgx) keeps its own per-connection
// statement cache, so the store uses this one for SQLite only.
type stmtCache struct {
	pool *sql.DB
	mu   sync.RWMutex
	m    map[string]*sql.Stmt
}

func newStmtCache(pool *sql.DB) *stmtCache {
	return &stmtCache{pool: pool, m: map[string]*sql.Stmt{}}
}

// get returns the prepared statement for query, preparing it if there is
// room; nil means run the query unprepared. The lock is not held while
// preparing: preparing waits for a connection of the pool, and a caller
// holding one (rows open) may be asking for another statement.
func (c *stmtCache) get(ctx context.Context, query string) *sql.Stmt {
	c.mu.RLock()
	st, ok := c.m[query]
	full := len(c.m) >= maxCachedStatements
	c.mu.RUnlock()
	if ok || full {
		return st
	}
	// Preparing also checks the statement: one that does not prepare is
	// not cached, and running it unprepared reports the error.
	st, err := c.pool.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if have, ok := c.m[query]; ok {
		st.Close()
		return have
	}
	if len(c.m) >= maxCachedStatements {
		st.Close()
		return nil
	}
	c.m[query] = st
	return st
}

// close closes every cached statement.
func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for q, st := range c.m {
		st.Close()
		delete(c.m, q)
	}
}

func (c *stmtCache) exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	if st := c.get(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return c.pool.ExecContext(ctx, query, args...)
}

func (c *stmtCache) query(ctx context.Context, query string, args []any) (*sql.Rows, error) {
	if st := c.get(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return c.pool.QueryContext(ctx, query, args...)
}

func (c *stmtCache) queryRow(ctx context.Context, query string, args []any) *sql.Row {
	if st := c.get(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return c.pool.QueryRowContext(ctx, query, args...)
}
