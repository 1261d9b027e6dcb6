package project_test

import (
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/project"
)

// TestValidTagKey holds ValidTagKey to TagKeyRule: 1 to 128 characters
// (not bytes), letters and digits of any script, spaces and _ . : / = + - @.
func TestValidTagKey(t *testing.T) {
	for key, want := range map[string]bool{
		"":                       false,
		"env":                    true,
		"cost center":            true,
		"a_b.c:d/e=f+g-h@i":      true,
		"Umgebung-ü":             true,
		"環境":                     true,
		"٣":                      true, // an Arabic-Indic digit
		strings.Repeat("a", 128): true,
		strings.Repeat("a", 129): false,
		strings.Repeat("ü", 128): true, // 256 bytes, 128 characters
		strings.Repeat("ü", 129): false,
		"a!b":                    false,
		"tab\there":              false,
		"new\nline":              false,
		"bad\xffutf8":            false,
		"quote\"":                false,
	} {
		if got := project.ValidTagKey(key); got != want {
			t.Errorf("ValidTagKey(%q) = %v, want %v", key, got, want)
		}
	}
}
