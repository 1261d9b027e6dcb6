package blob_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gocloud.dev/blob/fileblob"

	"github.com/terracehq/terrace/internal/blob"
)

// TestLocalWritesAreDurable holds a local store to syncing what it
// writes before a write returns (a state version is committed only after
// its blob is stored, so the blob must be on disk by then): the file, its
// folder and every folder above it up to the store's root, for Put and
// PutReader alike; a failed sync fails the write. No sidecar file is
// written, and a blob stored with fileblob's .attrs sidecar (how a local
// store wrote before) still reads, and deletes with its sidecar.
func TestLocalWritesAreDurable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blob.Open(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var synced []string
	restore := blob.SetSyncPath(func(p string) error {
		synced = append(synced, p)
		return blob.SyncFile(p)
	})
	defer restore()

	file := filepath.Join(dir, "state-versions", "sv-1", "state-x")
	want := []string{file, filepath.Dir(file), filepath.Join(dir, "state-versions"), dir}
	if err := s.Put(ctx, "state-versions/sv-1/state-x", []byte("v1")); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(synced, want) {
		t.Fatalf("Put synced %q, want %q", synced, want)
	}
	synced = nil
	if _, err := s.PutReader(ctx, "state-versions/sv-1/state-x", strings.NewReader("v2"), 10); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(synced, want) {
		t.Fatalf("PutReader synced %q, want %q", synced, want)
	}
	// Over the limit: nothing is written, so nothing is synced.
	synced = nil
	if _, err := s.PutReader(ctx, "state-versions/sv-2/state-y", strings.NewReader("too long"), 3); err == nil {
		t.Fatal("PutReader over the limit succeeded")
	}
	if len(synced) != 0 {
		t.Fatalf("a refused upload synced %q", synced)
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "state-x" {
		t.Fatalf("the blob's folder holds %v, want the blob alone (no sidecar, no temporary file)", entries)
	}

	// A failed sync fails the write, Put's and PutReader's.
	broken := errors.New("disk on fire")
	restore2 := blob.SetSyncPath(func(p string) error {
		if p == dir {
			return broken
		}
		return blob.SyncFile(p)
	})
	if err := s.Put(ctx, "state-versions/sv-3/state-z", []byte("v")); !errors.Is(err, broken) || !strings.Contains(err.Error(), "state-versions/sv-3/state-z") {
		t.Fatalf("Put with a failing sync: %v, want the sync's error naming the key", err)
	}
	if _, err := s.PutReader(ctx, "state-versions/sv-3/state-z", strings.NewReader("v"), 10); !errors.Is(err, broken) {
		t.Fatalf("PutReader with a failing sync: %v, want the sync's error", err)
	}
	restore2()

	// A key whose file name fileblob would escape is refused before
	// anything is written, not written under a name the sync does not
	// find.
	for _, key := range []string{"a//b", "a/../b", "a/b/", "a/x__0x41__", "a/b c", "a/\x01"} {
		if err := s.Put(ctx, key, []byte("v")); err == nil {
			t.Errorf("Put(%q) succeeded", key)
		}
		if _, err := s.PutReader(ctx, key, strings.NewReader("v"), 10); err == nil {
			t.Errorf("PutReader(%q) succeeded", key)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Fatalf("refused keys left something behind: %v", err)
	}

	// A blob as the store wrote it before: with a sidecar.
	old, err := fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.WriteAll(ctx, "logs/log-old", []byte("old log"), nil); err != nil {
		t.Fatal(err)
	}
	old.Close()
	sidecar := filepath.Join(dir, "logs", "log-old.attrs")
	if _, err := os.Stat(sidecar); err != nil {
		t.Fatalf("fileblob's default wrote no sidecar (this test no longer shows the old layout): %v", err)
	}
	got, err := s.Get(ctx, "logs/log-old")
	if err != nil || !bytes.Equal(got, []byte("old log")) {
		t.Fatalf("an old blob reads %q, %v", got, err)
	}
	if err := s.Delete(ctx, "logs/log-old"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sidecar); !os.IsNotExist(err) {
		t.Fatalf("the old blob's sidecar outlived it: %v", err)
	}
	// Rewritten, an old blob loses its sidecar (it described the old
	// content).
	old, err = fileblob.OpenBucket(dir, &fileblob.Options{NoTempDir: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.WriteAll(ctx, "logs/log-old", []byte("old log"), nil); err != nil {
		t.Fatal(err)
	}
	old.Close()
	if err := s.Put(ctx, "logs/log-old", []byte("new log")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sidecar); !os.IsNotExist(err) {
		t.Fatalf("a rewritten blob kept its old sidecar: %v", err)
	}
	if got, err := s.Get(ctx, "logs/log-old"); err != nil || string(got) != "new log" {
		t.Fatalf("the rewritten blob reads %q, %v", got, err)
	}
}
