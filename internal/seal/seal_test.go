package seal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func openDB(t *testing.T, st string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), storetest.DSN(t, st))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestKeysAndRotation(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		dir := t.TempDir()
		// First start: a key is generated into the data dir, mode 0600.
		k1, err := seal.Open(ctx, db, seal.Source{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, seal.KEKFile))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Fatalf("generated key file has mode %v, want 0600", fi.Mode().Perm())
		}
		sealed, err := k1.SealString("t.c", "hunter2")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(sealed, "hunter2") {
			t.Fatal("sealed value holds the plaintext")
		}
		if _, err := k1.OpenString("other.column", sealed); err == nil {
			t.Fatal("a value opened under another purpose")
		}
		blobData, err := k1.SealBytes([]byte("state"))
		if err != nil {
			t.Fatal(err)
		}

		// Rotation re-wraps; the running keyring is untouched, a restart
		// with the new key opens everything.
		old, err := seal.ReadKEKFile(filepath.Join(dir, seal.KEKFile))
		if err != nil {
			t.Fatal(err)
		}
		next := seal.GenerateKEK()
		if n, err := seal.Rotate(ctx, db, old, next); err != nil || n != 1 {
			t.Fatalf("rotate: %d, %v", n, err)
		}
		if n, err := seal.Rotate(ctx, db, old, next); err != nil || n != 0 {
			t.Fatalf("repeated rotate: %d, %v (want 0, nil)", n, err)
		}
		if v, err := k1.OpenString("t.c", sealed); err != nil || v != "hunter2" {
			t.Fatalf("running keyring after rotation: %q, %v", v, err)
		}
		k2, err := seal.Open(ctx, db, seal.Source{Configured: next.String(), DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		if v, err := k2.OpenString("t.c", sealed); err != nil || v != "hunter2" {
			t.Fatalf("after rotation: %q, %v", v, err)
		}
		if b, err := k2.OpenBytes(blobData); err != nil || string(b) != "state" {
			t.Fatalf("blob after rotation: %q, %v", b, err)
		}
		// The data-dir key is now the old one: a clear error naming both.
		_, err = seal.Open(ctx, db, seal.Source{DataDir: dir})
		if err == nil || !strings.Contains(err.Error(), "wrong key-encryption key") || !strings.Contains(err.Error(), next.ID) || !strings.Contains(err.Error(), old.ID) {
			t.Fatalf("old key: %v", err)
		}
		// No key anywhere while data keys exist: never generate a new one.
		if _, err := seal.Open(ctx, db, seal.Source{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "missing key-encryption key") {
			t.Fatalf("missing key: %v", err)
		}
		if _, err := seal.Open(ctx, db, seal.Source{Configured: "not a key", DataDir: dir}); err == nil || !strings.Contains(err.Error(), "32 bytes") {
			t.Fatalf("malformed key: %v", err)
		}
	})
}

func TestMigrateSealsPlainRowsOnce(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Exec(ctx, `CREATE TABLE seal_probe (id TEXT PRIMARY KEY, v TEXT)`); err != nil {
			t.Fatal(err)
		}
		k, err := seal.Open(ctx, db, seal.Source{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		col := seal.Column{Table: "seal_probe", IDColumn: "id", Column: "v", Purpose: "seal_probe.v"}
		already, _ := k.SealString(col.Purpose, "was sealed")
		for id, v := range map[string]any{"a": "plain-a", "b": "tsl1.dk1.looks-sealed-but-is-not", "c": already, "d": nil} {
			if _, err := db.Exec(ctx, `INSERT INTO seal_probe (id, v) VALUES (?, ?)`, id, v); err != nil {
				t.Fatal(err)
			}
		}
		n, err := k.Migrate(ctx, db, []seal.Column{col})
		if err != nil || n != 2 {
			t.Fatalf("migrate: %d, %v (want 2)", n, err)
		}
		want := map[string]string{"a": "plain-a", "b": "tsl1.dk1.looks-sealed-but-is-not", "c": "was sealed"}
		for id, w := range want {
			var raw string
			if err := db.QueryRow(ctx, `SELECT v FROM seal_probe WHERE id = ?`, id).Scan(&raw); err != nil {
				t.Fatal(err)
			}
			if raw == w {
				t.Fatalf("row %s is still plain", id)
			}
			if got, err := k.OpenString(col.Purpose, raw); err != nil || got != w {
				t.Fatalf("row %s opens to %q, %v; want %q", id, got, err, w)
			}
		}
		// Done once: a plain row written later is left (and read as is).
		if _, err := db.Exec(ctx, `INSERT INTO seal_probe (id, v) VALUES ('e', 'late')`); err != nil {
			t.Fatal(err)
		}
		if n, err := k.Migrate(ctx, db, []seal.Column{col}); err != nil || n != 0 {
			t.Fatalf("second migrate: %d, %v", n, err)
		}
	})
}

func TestStreamFormat(t *testing.T) {
	t.Parallel()
	db := openDB(t, "sqlite")
	k, err := seal.Open(context.Background(), db, seal.Source{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{0, 1, seal.ChunkSize - 1, seal.ChunkSize, seal.ChunkSize + 1, 3 * seal.ChunkSize, 3*seal.ChunkSize + 17} {
		plain := make([]byte, size)
		_, _ = rand.Read(plain)
		sealed, err := k.SealBytes(plain)
		if err != nil {
			t.Fatal(err)
		}
		if got := seal.PlainSize(int64(len(sealed)), seal.HeaderSize(sealed)); got != int64(size) {
			t.Fatalf("size %d: PlainSize says %d", size, got)
		}
		// Small reads exercise the chunk boundaries.
		r, err := k.OpenReader(bytes.NewReader(sealed))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(io.LimitReader(onebyteish{r}, int64(size)+1))
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: round trip gave %d bytes, %v", size, len(got), err)
		}
		if size == 0 {
			continue
		}
		// Truncation at a chunk boundary, a flipped bit: errors, never
		// wrong plaintext.
		bad := map[string][]byte{
			"truncated": sealed[:len(sealed)-1],
			"flipped":   flip(sealed, seal.HeaderSize(sealed)+(len(sealed)-seal.HeaderSize(sealed))/2),
		}
		if size > seal.ChunkSize {
			bad["last chunk dropped"] = sealed[:seal.HeaderSize(sealed)+seal.ChunkSize+16]
		}
		for name, b := range bad {
			if _, err := k.OpenBytes(b); err == nil {
				t.Fatalf("size %d, %s: opened", size, name)
			}
		}
	}
}

type onebyteish struct{ r io.Reader }

func (o onebyteish) Read(p []byte) (int, error) { return o.r.Read(p[:min(len(p), 7)]) }

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 1
	return c
}

// TestBlobStoreSealing: blobs are sealed on disk, read back as written
// with their plaintext size, and plain blobs written before sealing stay
// readable until SealAll converts them.
func TestBlobStoreSealing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k, err := seal.Open(ctx, openDB(t, "sqlite"), seal.Source{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bs, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	legacy := []byte(`{"version":4,"secret":"legacy-plain"}`)
	if err := bs.Put(ctx, "old/state", legacy); err != nil {
		t.Fatal(err)
	}
	bs.Seal(k)
	big := bytes.Repeat([]byte("streamed-secret "), 20000)
	if _, err := bs.PutReader(ctx, "new/streamed", bytes.NewReader(big), 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := bs.Put(ctx, "new/put", []byte("put-secret")); err != nil {
		t.Fatal(err)
	}
	check := func(key string, want []byte) {
		t.Helper()
		got, err := bs.Get(ctx, key)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Get %s: %d bytes, %v", key, len(got), err)
		}
		r, n, err := bs.Reader(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		got, err = io.ReadAll(r)
		r.Close()
		if err != nil || !bytes.Equal(got, want) || n != int64(len(want)) {
			t.Fatalf("Reader %s: %d bytes (size %d), %v; want %d", key, len(got), n, err, len(want))
		}
	}
	check("old/state", legacy)
	check("new/streamed", big)
	check("new/put", []byte("put-secret"))
	if n, err := bs.SealAll(ctx); err != nil || n != 1 {
		t.Fatalf("SealAll: %d, %v (want 1)", n, err)
	}
	check("old/state", legacy)
	// An over-limit streamed upload leaves nothing.
	if _, err := bs.PutReader(ctx, "new/too-big", bytes.NewReader(big), 100); err == nil {
		t.Fatal("an upload over the limit was accepted")
	}
	if ok, _ := bs.Exists(ctx, "new/too-big"); ok {
		t.Fatal("an upload over the limit left a blob")
	}
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".attrs") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if !seal.IsSealedHeader(b) || bytes.Contains(b, []byte("secret")) {
			t.Errorf("%s is not sealed", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
