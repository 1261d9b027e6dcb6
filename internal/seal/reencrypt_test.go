package seal_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestReencrypt: values and blobs sealed under the first data key are
// re-sealed under a new one; a keyring opened before the new key existed
// (a running server) opens them and then seals under the new key; an
// interrupted re-encryption is resumed with the same key; plain values are
// left to Migrate.
func TestReencrypt(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		dir := t.TempDir()
		if _, err := db.Exec(ctx, `CREATE TABLE reencrypt_test (id TEXT PRIMARY KEY, v TEXT)`); err != nil {
			t.Fatal(err)
		}
		col := seal.Column{Table: "reencrypt_test", IDColumn: "id", Column: "v", Purpose: "reencrypt_test.v"}
		running, err := seal.Open(ctx, db, seal.Source{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		const rows = 450 // more than one batch
		for i := range rows {
			v, err := running.SealString(col.Purpose, fmt.Sprintf("secret-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(ctx, `INSERT INTO reencrypt_test (id, v) VALUES (?, ?)`, fmt.Sprintf("r%04d", i), v); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := db.Exec(ctx, `INSERT INTO reencrypt_test (id, v) VALUES ('plain', 'not sealed yet')`); err != nil {
			t.Fatal(err)
		}
		bs, err := blob.Open(ctx, filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		defer bs.Close()
		bs.Seal(running)
		big := make([]byte, 3*seal.ChunkSize+17)
		_, _ = rand.Read(big)
		blobs := map[string][]byte{"state/a": []byte(`{"serial":1}`), "plan/b": big}
		for k, v := range blobs {
			if err := bs.Put(ctx, k, v); err != nil {
				t.Fatal(err)
			}
		}
		first := running.Active()

		// The command's keyring makes the new key; stopped before
		// re-sealing anything, a second run resumes with the same key.
		cmdKeys, err := seal.Open(ctx, db, seal.Source{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		target, resumed, err := cmdKeys.Target(ctx, db)
		if err != nil || resumed || target == first {
			t.Fatalf("Target = %q, %v, %v; want a new key other than %q", target, resumed, err, first)
		}
		cmdKeys, err = seal.Open(ctx, db, seal.Source{DataDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		again, resumed, err := cmdKeys.Target(ctx, db)
		if err != nil || !resumed || again != target {
			t.Fatalf("second Target = %q, %v, %v; want %q resumed", again, resumed, err, target)
		}
		n, err := cmdKeys.Reseal(ctx, db, []seal.Column{col})
		if err != nil || n != rows {
			t.Fatalf("Reseal = %d, %v; want %d", n, err, rows)
		}
		cmdBlobs, err := blob.Open(ctx, filepath.Join(dir, "blobs"))
		if err != nil {
			t.Fatal(err)
		}
		defer cmdBlobs.Close()
		cmdBlobs.Seal(cmdKeys)
		if n, err := cmdBlobs.Reseal(ctx); err != nil || n != len(blobs) {
			t.Fatalf("blob Reseal = %d, %v; want %d", n, err, len(blobs))
		}
		if err := seal.Finish(ctx, db, target); err != nil {
			t.Fatal(err)
		}
		// Nothing left to do: a repeat re-seals nothing.
		if n, err := cmdKeys.Reseal(ctx, db, []seal.Column{col}); err != nil || n != 0 {
			t.Fatalf("repeated Reseal = %d, %v; want 0", n, err)
		}

		// Every sealed row is under the new key and opens in the running
		// keyring, which then seals under the new key too.
		all, err := store.All(ctx, db, func(sc store.Scanner) ([2]string, error) {
			var r [2]string
			err := sc.Scan(&r[0], &r[1])
			return r, err
		}, `SELECT id, v FROM reencrypt_test ORDER BY id`)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range all {
			if r[0] == "plain" {
				if r[1] != "not sealed yet" {
					t.Fatalf("the plain row became %q", r[1])
				}
				continue
			}
			if id, ok := seal.KeyID([]byte(r[1])); !ok || id != target {
				t.Fatalf("row %s is sealed under %q, want %q", r[0], id, target)
			}
			var i int
			fmt.Sscanf(r[0], "r%d", &i)
			if got, err := running.OpenString(col.Purpose, r[1]); err != nil || got != fmt.Sprintf("secret-%d", i) {
				t.Fatalf("the running keyring opens row %s as %q, %v", r[0], got, err)
			}
		}
		if running.Active() != target {
			t.Fatalf("the running keyring seals under %q after meeting %q", running.Active(), target)
		}
		for k, want := range blobs {
			got, err := bs.Get(ctx, k)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("blob %s after re-encryption: %d bytes, %v", k, len(got), err)
			}
			raw, err := os.ReadFile(filepath.Join(dir, "blobs", filepath.FromSlash(k)))
			if err != nil {
				t.Fatal(err)
			}
			if id, ok := seal.KeyID(raw); !ok || id != target {
				t.Fatalf("blob %s is sealed under %q, want %q", k, id, target)
			}
		}

		// Finished: the next run makes another key, and rotation re-wraps
		// all of them.
		third, resumed, err := cmdKeys.Target(ctx, db)
		if err != nil || resumed || third == target || third == first {
			t.Fatalf("Target after a finished re-encryption = %q, %v, %v", third, resumed, err)
		}
		old, err := seal.ReadKEKFile(filepath.Join(dir, seal.KEKFile))
		if err != nil {
			t.Fatal(err)
		}
		if n, err := seal.Rotate(ctx, db, old, seal.GenerateKEK()); err != nil || n != 3 {
			t.Fatalf("Rotate = %d, %v; want 3 data keys re-wrapped", n, err)
		}
	})
}
