package storetest

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// SQLiteDSN returns the path of a new SQLite database file for the test.
func SQLiteDSN(t testing.TB) string { return filepath.Join(t.TempDir(), "terrace.db") }

// Exercise is the conformance suite every store driver passes: migrations,
// placeholders, types, constraint errors, transactions and concurrent
// writers. newDSN returns a fresh, empty database.
func Exercise(t *testing.T, newDSN func(testing.TB) string) {
	ctx := context.Background()
	open := func(t *testing.T, dsn string) *store.DB {
		db, err := store.Open(ctx, dsn)
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	seedOrg := func(t *testing.T, q store.Q, name string) {
		if _, err := q.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-"+name, name, "x@example.com", 1, 1); err != nil {
			t.Fatalf("insert organization: %v", err)
		}
	}

	t.Run("MigrationsAreIdempotent", func(t *testing.T) {
		dsn := newDSN(t)
		db := open(t, dsn)
		db.Close()
		db2 := open(t, dsn)
		var n int
		if err := db2.QueryRow(ctx, `SELECT COUNT(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatal("no migrations recorded")
		}
	})

	t.Run("Page", func(t *testing.T) {
		db := open(t, newDSN(t))
		for _, n := range []string{"a_1", "b", "c", "d", "e"} {
			seedOrg(t, db, n)
		}
		name := func(sc store.Scanner) (string, error) {
			var v string
			return v, sc.Scan(&v)
		}
		// Every org but one, through an IN list and an escaped LIKE.
		in, args := store.In([]string{"a_1", "b", "c", "d"})
		where := `name IN (` + in + `) AND name NOT LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike("_")+"1")
		kept := append([]any(nil), args...)
		for _, tc := range []struct {
			offset, limit int
			want          string
		}{
			{0, 2, "b,c"}, {2, 2, "d"}, {3, 2, ""}, {-5, 1, "b"}, {0, -1, "b,c,d"}, {1, -1, "c,d"}, {0, 0, ""},
		} {
			got, total, err := store.Page(ctx, db, name, "name", "organizations", where, "name", tc.offset, tc.limit, args...)
			if err != nil || total != 3 || strings.Join(got, ",") != tc.want || got == nil {
				t.Errorf("page at %d of %d: %q of %d (%v), want %q of 3", tc.offset, tc.limit, strings.Join(got, ","), total, err, tc.want)
			}
		}
		if fmt.Sprint(args) != fmt.Sprint(kept) {
			t.Errorf("Page changed its caller's arguments: %v, was %v", args, kept)
		}
	})

	t.Run("WritesEndTheRequestMemo", func(t *testing.T) {
		db := open(t, newDSN(t))
		seedOrg(t, db, "m")
		// memoActive reports whether ctx's request memo still answers:
		// a second Memoize of a fresh key loads again once it does not.
		n := 0
		memoActive := func(ctx context.Context) bool {
			n++
			key := fmt.Sprint("probe-", n)
			load := func() (int, error) { n++; return n, nil }
			a, _ := core.Memoize(ctx, key, load)
			b, _ := core.Memoize(ctx, key, load)
			return a == b
		}
		scanOne := func(ctx context.Context, query string, args ...any) {
			t.Helper()
			var v any
			if err := db.QueryRow(ctx, query, args...).Scan(&v); err != nil {
				t.Fatalf("%s: %v", query, err)
			}
		}
		// Reads leave it answering, a WITH and a column named updated_at too.
		ctx := core.WithMemoUntilWrite(context.Background())
		scanOne(ctx, `SELECT name FROM organizations WHERE id = ?`, "org-m")
		scanOne(ctx, `WITH o AS (SELECT updated_at FROM organizations) SELECT COUNT(*) FROM o`)
		scanOne(ctx, "\n\t-- a comment\n  select count(*) from organizations")
		rows, err := db.Query(ctx, `SELECT name FROM organizations`)
		if err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if !memoActive(ctx) {
			t.Fatal("a read ended the request memo")
		}
		// Each way to write ends it.
		writes := map[string]func(ctx context.Context) error{
			"Exec": func(ctx context.Context) error {
				_, err := db.Exec(ctx, `UPDATE organizations SET email = ? WHERE id = ?`, "y@example.com", "org-m")
				return err
			},
			"Tx": func(ctx context.Context) error {
				return db.Tx(ctx, func(tx *store.Tx) error {
					_, err := tx.Exec(ctx, `UPDATE organizations SET email = ? WHERE id = ?`, "z@example.com", "org-m")
					return err
				})
			},
			"QueryRow with WITH and RETURNING": func(ctx context.Context) error {
				var id string
				return db.QueryRow(ctx, `WITH o AS (SELECT id FROM organizations WHERE id = ?) UPDATE organizations SET email = ? WHERE id IN (SELECT id FROM o) RETURNING id`, "org-m", "w@example.com").Scan(&id)
			},
			"Query with DELETE": func(ctx context.Context) error {
				rows, err := db.Query(ctx, `DELETE FROM organizations WHERE id = ? RETURNING id`, "org-none")
				if err == nil {
					rows.Close()
				}
				return err
			},
		}
		for name, write := range writes {
			ctx := core.WithMemoUntilWrite(context.Background())
			if !memoActive(ctx) {
				t.Fatalf("%s: the memo did not answer before the write", name)
			}
			if err := write(ctx); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if memoActive(ctx) {
				t.Errorf("%s: the request memo still answers after the request wrote", name)
			}
		}
	})

	t.Run("TypesRoundTrip", func(t *testing.T) {
		db := open(t, newDSN(t))
		big := int64(1) << 53
		if _, err := db.Exec(ctx, `INSERT INTO users (id, username, email, is_site_admin, created_at) VALUES (?, ?, ?, ?, ?)`, "user-1", "ünïcode 名前", "", true, big); err != nil {
			t.Fatal(err)
		}
		var name string
		var admin bool
		var at int64
		if err := db.QueryRow(ctx, `SELECT username, is_site_admin, created_at FROM users WHERE id = ? AND is_site_admin = ?`, "user-1", true).Scan(&name, &admin, &at); err != nil {
			t.Fatal(err)
		}
		if name != "ünïcode 名前" || !admin || at != big {
			t.Fatalf("round trip gave %q %v %d", name, admin, at)
		}
	})

	t.Run("UniqueViolationIsClassified", func(t *testing.T) {
		db := open(t, newDSN(t))
		seedOrg(t, db, "acme")
		_, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-other", "acme", "y@example.com", 1, 1)
		if !store.IsUniqueViolation(db, err) {
			t.Fatalf("duplicate name: got %v, want a unique violation", err)
		}
		if store.IsUniqueViolation(db, errors.New("other")) {
			t.Fatal("an unrelated error was classified as a unique violation")
		}
	})

	t.Run("TxRollsBackOnError", func(t *testing.T) {
		db := open(t, newDSN(t))
		boom := errors.New("boom")
		err := db.Tx(ctx, func(tx *store.Tx) error {
			seedOrg(t, tx, "rolled")
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Tx returned %v, want boom", err)
		}
		var n int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM organizations WHERE name = ?`, "rolled").Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatal("a rolled-back insert is visible")
		}
	})

	t.Run("ForeignKeysCascade", func(t *testing.T) {
		db := open(t, newDSN(t))
		seedOrg(t, db, "cascade")
		if _, err := db.Exec(ctx, `INSERT INTO teams (id, organization_name, name, created_at) VALUES (?, ?, ?, ?)`, "team-1", "cascade", "owners", 1); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE organizations SET name = ? WHERE name = ?`, "renamed", "cascade"); err != nil {
			t.Fatal(err)
		}
		var org string
		if err := db.QueryRow(ctx, `SELECT organization_name FROM teams WHERE id = ?`, "team-1").Scan(&org); err != nil || org != "renamed" {
			t.Fatalf("rename did not cascade: %q %v", org, err)
		}
		if _, err := db.Exec(ctx, `DELETE FROM organizations WHERE name = ?`, "renamed"); err != nil {
			t.Fatal(err)
		}
		var n int
		_ = db.QueryRow(ctx, `SELECT COUNT(*) FROM teams`).Scan(&n)
		if n != 0 {
			t.Fatal("delete did not cascade")
		}
	})

	t.Run("AllScansEveryRow", func(t *testing.T) {
		db := open(t, newDSN(t))
		for _, n := range []string{"b", "a", "c"} {
			seedOrg(t, db, n)
		}
		scanName := func(sc store.Scanner) (string, error) {
			var n string
			err := sc.Scan(&n)
			return n, err
		}
		got, err := store.All(ctx, db, scanName, `SELECT name FROM organizations WHERE name <> ? ORDER BY name`, "c")
		if err != nil || fmt.Sprint(got) != "[a b]" {
			t.Fatalf("All = %v, %v; want [a b]", got, err)
		}
		none, err := store.All(ctx, db, scanName, `SELECT name FROM organizations WHERE name = ?`, "zzz")
		if err != nil || len(none) != 0 {
			t.Fatalf("All with no rows = %v, %v", none, err)
		}
		bad := func(sc store.Scanner) (string, error) { return "", errors.New("scan failed") }
		if _, err := store.All(ctx, db, bad, `SELECT name FROM organizations`); err == nil {
			t.Fatal("All hid a scan error")
		}
	})

	t.Run("ConcurrentWritersAllSucceed", func(t *testing.T) {
		db := open(t, newDSN(t))
		seedOrg(t, db, "busy")
		const writers = 32
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- db.Tx(ctx, func(tx *store.Tx) error {
					var name string
					if err := tx.QueryRow(ctx, `SELECT name FROM organizations WHERE name = ?`+store.ForUpdate(tx), "busy").Scan(&name); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, `INSERT INTO teams (id, organization_name, name, created_at) VALUES (?, ?, ?, ?)`, fmt.Sprintf("team-%d", i), "busy", fmt.Sprintf("t%d", i), 1)
					return err
				})
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("concurrent write failed: %v", err)
			}
		}
		var n int
		_ = db.QueryRow(ctx, `SELECT COUNT(*) FROM teams`).Scan(&n)
		if n != writers {
			t.Fatalf("got %d rows, want %d", n, writers)
		}
	})

	// SQLite's pools keep prepared statements by query text (stmtcache.go);
	// every driver must behave as if each statement were new.
	t.Run("RepeatedStatements", func(t *testing.T) {
		db := open(t, newDSN(t))
		seedOrg(t, db, "rep")
		const read = `SELECT email FROM organizations WHERE name = ?`
		for i := range 3 {
			want := fmt.Sprintf("v%d@example.com", i)
			if _, err := db.Exec(ctx, `UPDATE organizations SET email = ? WHERE name = ?`, want, "rep"); err != nil {
				t.Fatal(err)
			}
			var got string
			if err := db.QueryRow(ctx, read, "rep").Scan(&got); err != nil || got != want {
				t.Fatalf("read %d: %q, %v; want %q", i, got, err, want)
			}
			if err := db.QueryRow(ctx, read, "nobody").Scan(&got); !store.IsNoRows(err) {
				t.Fatalf("read of a missing row: %v, want no rows", err)
			}
			// A statement that cannot be prepared fails every time.
			if _, err := db.Query(ctx, `SELECT nope FROM organizations`); err == nil {
				t.Fatal("a query of a missing column succeeded")
			}
		}
		// A query run while another's rows are open, many times over, and
		// more distinct queries than any cache keeps.
		rows, err := db.Query(ctx, `SELECT name FROM organizations`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				t.Fatal(err)
			}
			for i := range 300 {
				var n int
				if err := db.QueryRow(ctx, fmt.Sprintf(`SELECT COUNT(*) + %d FROM organizations WHERE name = ?`, i), name).Scan(&n); err != nil || n != i+1 {
					t.Fatalf("distinct query %d: %d, %v", i, n, err)
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		// Concurrent readers of one statement each get their own answer.
		before := db.Queries()
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for i := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range 20 {
					var n int
					if err := db.QueryRow(ctx, `SELECT CAST(? AS INTEGER) + CAST(? AS INTEGER)`, i, j).Scan(&n); err != nil || n != i+j {
						errs <- fmt.Errorf("reader %d, %d: %d, %v", i, j, n, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if got := db.Queries() - before; got != 16*20 {
			t.Fatalf("Queries counted %d statements, want %d", got, 16*20)
		}
	})

	t.Run("QueryOnDBInsideItsTxIsRefused", func(t *testing.T) {
		t.Setenv(store.TxGuardEnv, "1")
		db := open(t, newDSN(t))
		seedOrg(t, db, "guarded")
		const byName = `SELECT COUNT(*) FROM organizations WHERE name = ?`
		refused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, store.ErrConnInTx) {
				t.Errorf("%s on the DB inside its Tx: got %v, want store.ErrConnInTx", what, err)
			}
		}
		// The other goroutine's query waits for this one to leave the Tx.
		other := make(chan error, 1)
		inTx := make(chan struct{})
		err := db.Tx(ctx, func(tx *store.Tx) error {
			var n int
			refused("QueryRow", db.QueryRow(ctx, byName, "guarded").Scan(&n))
			_, err := db.Query(ctx, byName, "guarded")
			refused("Query", err)
			_, err = db.Exec(ctx, `UPDATE organizations SET email = ? WHERE name = ?`, "z@example.com", "guarded")
			refused("Exec", err)
			refused("Notify", db.Notify(ctx, "guarded"))
			refused("nested Tx", db.Tx(ctx, func(*store.Tx) error { return nil }))
			// Another goroutine, even with the same context, is not refused.
			go func() {
				<-inTx
				var n int
				other <- db.QueryRow(ctx, byName, "guarded").Scan(&n)
			}()
			close(inTx)
			if err := <-other; err != nil {
				t.Errorf("a query on the DB from another goroutine during the Tx: %v", err)
			}
			// The Tx itself still works.
			if err := tx.QueryRow(ctx, byName, "guarded").Scan(&n); err != nil || n != 1 {
				t.Errorf("query through the Tx: %d, %v", n, err)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Tx: %v", err)
		}
		// After the Tx the DB answers again, and the refused write did nothing.
		var email string
		if err := db.QueryRow(ctx, `SELECT email FROM organizations WHERE name = ?`, "guarded").Scan(&email); err != nil || email != "x@example.com" {
			t.Fatalf("after the Tx: email %q, %v; want the seeded x@example.com", email, err)
		}
	})
}
