package blob

// SetSyncPath replaces how a local store flushes a file or folder to
// disk, until the returned func restores it.
func SetSyncPath(f func(path string) error) (restore func()) {
	old := syncPath
	syncPath = f
	return func() { syncPath = old }
}

// SyncFile is the real flush.
var SyncFile = syncPath
