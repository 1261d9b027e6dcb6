//go:build !linux

package binpages

// Release does nothing outside Linux.
func Release() (Released, error) { return Released{}, nil }
