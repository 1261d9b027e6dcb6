// Package e2e holds Terrace's end-to-end tests: the real terraform and tofu
// binaries (every engine testenv.Engines lists) driving a real Terrace
// server over HTTPS, on both stores, and fault tests that kill a real
// server process.
package e2e
