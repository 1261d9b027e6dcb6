package core

import (
	"fmt"
	"os"
	"path/filepath"
)

// WriteFileAtomic writes data to path with mode, durably: a reader sees
// the old file or the new one whole, and once it returns the new file
// survives a crash of the machine. The data goes to a temporary file in
// the same folder, which is synced, renamed over path, and then the
// folder is synced (the rename is an entry in it). Without the syncs a
// power loss can leave a zero-length file under the new name, which for
// the generated key-encryption key (internal/seal) would make every
// sealed value in the database unreadable.
func WriteFileAtomic(path string, data []byte, mode os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	if err := SyncPath(dir); err != nil {
		return fmt.Errorf("syncing the folder of %s: %w", path, err)
	}
	return nil
}

// SyncPath flushes the file or folder at path to disk (for a folder: the
// names in it, such as a file just renamed into it).
func SyncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	err = syncFile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncFile flushes a file or folder to disk (a variable for the test
// that makes it fail).
var syncFile = func(f *os.File) error { return f.Sync() }
