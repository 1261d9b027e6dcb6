package testenv

import (
	"bytes"
	"database/sql"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // reads PostgreSQL rows raw

	"github.com/terracehq/terrace/internal/seal"
)

// AssertNoSecrets reads every database row (PostgreSQL) or the database
// files (SQLite), and every blob file of a stopped e, looking for each
// secret (what → value): none may appear, and every blob must be sealed.
// present is a string the database is known to hold (a name the test
// created), so a scan that reads nothing fails.
func AssertNoSecrets(t testing.TB, e *Env, present string, secrets map[string]string) {
	t.Helper()
	var raw [][]byte
	var where []string
	if e.Opts.Store == "postgres" {
		raw = append(raw, postgresRows(t, e.Opts.Database))
		where = append(where, "PostgreSQL rows")
	} else {
		for _, suffix := range []string{"", "-wal"} {
			b, err := os.ReadFile(e.Opts.Database + suffix)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			raw = append(raw, b)
			where = append(where, "SQLite file "+filepath.Base(e.Opts.Database+suffix))
		}
	}
	blobs := 0
	err := filepath.WalkDir(filepath.Join(e.Opts.DataDir, "blobs"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		// fileblob's .attrs sidecars hold content type and checksum.
		if !strings.HasSuffix(path, ".attrs") {
			blobs++
		}
		if !strings.HasSuffix(path, ".attrs") && !seal.IsSealedHeader(b) {
			t.Errorf("blob %s is not sealed", path)
		}
		raw = append(raw, b)
		where = append(where, "blob "+path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if blobs < 3 { // configuration archive, plan, state, logs
		t.Fatalf("found %d blob files: the test is not looking in the right place", blobs)
	}
	// The scan can fail: the database does hold present.
	if !bytes.Contains(bytes.Join(raw, nil), []byte(present)) {
		t.Fatalf("the raw data lacks %q: the scan reads nothing", present)
	}
	for what, s := range secrets {
		// A secret of several lines (a PEM key) is looked for line by
		// line, so that it is found inside a JSON-escaped string too;
		// the PEM armour lines are no secret.
		for _, needle := range strings.Split(s, "\n") {
			if needle == "" || strings.HasPrefix(needle, "-----") {
				continue
			}
			for i, b := range raw {
				if j := bytes.Index(b, []byte(needle)); j >= 0 {
					t.Errorf("the %s appears in plain text in %s: %q", what, where[i], b[max(0, j-300):min(len(b), j+100)])
				}
			}
		}
	}
}

// postgresRows returns every row of every table as text.
func postgresRows(t testing.TB, dsn string) []byte {
	t.Helper()
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT tablename FROM pg_tables WHERE schemaname = 'public'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var out bytes.Buffer
	for _, tb := range tables {
		r, err := db.Query(`SELECT t::text FROM "` + tb + `" t`)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			var s string
			if err := r.Scan(&s); err != nil {
				t.Fatal(err)
			}
			_, _ = io.WriteString(&out, s+"\n")
		}
		r.Close()
	}
	return out.Bytes()
}
