package core

import "time"

// Now returns the current time in UTC, truncated to microseconds so that it
// survives a round trip through either store unchanged.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// FromMicros converts a stored timestamp (Unix microseconds) to UTC time.
func FromMicros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// Micros converts t to the stored form (Unix microseconds).
func Micros(t time.Time) int64 { return t.UnixMicro() }
