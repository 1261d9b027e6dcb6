package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"
)

// Migrations are SQL files named NNNN_name.sql (portable) or
// NNNN_name.sqlite.sql / NNNN_name.postgres.sql (one dialect). They run in
// name order, each in its own transaction, and are recorded in
// schema_migrations. Statements are separated by a line ending in ';'.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

func migrate(ctx context.Context, db *DB) error { return migrateTo(ctx, db, "") }

// migrateTo applies the migrations whose versions sort up to until
// (all of them when until is empty).
func migrateTo(ctx context.Context, db *DB, until string) error {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	dialect := db.driver.Name()
	return db.Tx(ctx, func(tx *Tx) error {
		if dialect == "postgres" {
			// Serialise concurrent replicas starting at once.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7351)`); err != nil {
				return err
			}
		}
		// Under the lock: two replicas creating the table at once collide
		// in PostgreSQL's catalog even with IF NOT EXISTS.
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY, applied_at BIGINT NOT NULL)`); err != nil {
			return err
		}
		for _, name := range names {
			base := strings.TrimSuffix(strings.TrimPrefix(name, "migrations/"), ".sql")
			version := base
			if d, ok := strings.CutSuffix(base, ".sqlite"); ok {
				if dialect != "sqlite" {
					continue
				}
				version = d
			} else if d, ok := strings.CutSuffix(base, ".postgres"); ok {
				if dialect != "postgres" {
					continue
				}
				version = d
			}
			if until != "" && version > until {
				break
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				continue
			}
			body, err := migrationFiles.ReadFile(name)
			if err != nil {
				return err
			}
			for _, stmt := range splitStatements(string(body)) {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, version); err != nil {
				return err
			}
		}
		return nil
	})
}

func splitStatements(body string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(body, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "--") || trimmed == "" {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(trimmed, ";") {
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
		}
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}
