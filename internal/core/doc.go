// Package core is Terrace's small shared vocabulary: typed, prefixed IDs,
// error kinds that every domain package returns and that the HTTP edge maps
// to status codes once, and the clock.
package core
