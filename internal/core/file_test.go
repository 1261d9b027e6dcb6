package core

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestWriteFileAtomic: the file has the data and the mode, replaces what
// was there, leaves no temporary file, and is synced (the file, then its
// folder) before the call returns; a failed sync fails the call and, when
// it is the file's, leaves the old file as it was.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "kek")
	var synced []string
	old := syncFile
	defer func() { syncFile = old }()
	syncFile = func(f *os.File) error {
		synced = append(synced, f.Name())
		return old(f)
	}
	if err := WriteFileAtomic(path, []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 2 || filepath.Dir(synced[0]) != dir || synced[0] == path || synced[1] != dir {
		t.Fatalf("synced %q, want the temporary file in %s, then the folder", synced, dir)
	}
	if err := WriteFileAtomic(path, []byte("two"), 0o640); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two" {
		t.Fatalf("the file reads %q, %v", b, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o640 {
		t.Fatalf("mode %v, want 0640", fi.Mode().Perm())
	}

	broken := errors.New("disk on fire")
	syncFile = func(f *os.File) error {
		if f.Name() != dir {
			return broken
		}
		return old(f)
	}
	if err := WriteFileAtomic(path, []byte("three"), 0o600); !errors.Is(err, broken) {
		t.Fatalf("a failed sync of the file: %v, want its error", err)
	}
	if b, _ := os.ReadFile(path); string(b) != "two" {
		t.Fatalf("after a failed write the file reads %q, want the old %q", b, "two")
	}
	syncFile = func(f *os.File) error {
		if f.Name() == dir {
			return broken
		}
		return old(f)
	}
	if err := WriteFileAtomic(path, []byte("four"), 0o600); !errors.Is(err, broken) {
		t.Fatalf("a failed sync of the folder: %v, want its error", err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{"kek"}) {
		t.Fatalf("the folder holds %v, want the file alone", names)
	}
}
