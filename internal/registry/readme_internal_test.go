package registry

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReadReadme: which file is a module's README, and what of it is kept.
func TestReadReadme(t *testing.T) {
	write := func(t *testing.T, dir, name, body string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("README.md first, any case", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "README", "plain")
		write(t, dir, "Readme.MD", "# markdown")
		write(t, dir, "main.tf", "")
		if got, err := readReadme(dir); err != nil || got != "# markdown" {
			t.Fatalf("got %q, %v; want the markdown README", got, err)
		}
	})
	t.Run("none", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "main.tf", "")
		if err := os.Mkdir(filepath.Join(dir, "readme"), 0o755); err != nil {
			t.Fatal(err)
		}
		if got, err := readReadme(dir); err != nil || got != "" {
			t.Fatalf("got %q, %v; want none (a folder is no README)", got, err)
		}
	})
	t.Run("a link is not followed", func(t *testing.T) {
		dir := t.TempDir()
		secret := filepath.Join(t.TempDir(), "secret")
		write(t, filepath.Dir(secret), "secret", "do not show")
		if err := os.Symlink(secret, filepath.Join(dir, "README.md")); err != nil {
			t.Fatal(err)
		}
		write(t, dir, "README", "the plain one")
		if got, err := readReadme(dir); err != nil || got != "the plain one" {
			t.Fatalf("got %q, %v; want the regular file, not the link's target", got, err)
		}
	})
	t.Run("cut at a character, and said", func(t *testing.T) {
		// Two bytes a character, from an even and an odd offset: one of
		// them puts the cut inside a character.
		for _, lead := range []string{"", "x"} {
			dir := t.TempDir()
			write(t, dir, "README.md", lead+strings.Repeat("é", MaxReadme))
			got, err := readReadme(dir)
			if err != nil || len(got) > MaxReadme || len(got) < MaxReadme-2 || !strings.HasSuffix(got, readmeCut) || !strings.HasPrefix(got, lead+"éé") {
				t.Fatalf("a long README: %d bytes, %v; want at most %d (and at most a character less), cut with the note", len(got), err, MaxReadme)
			}
			if !utf8.ValidString(got) || strings.Contains(got, "\uFFFD") {
				t.Fatal("the cut split a character")
			}
		}
	})
	t.Run("invalid UTF-8 replaced, the rest kept", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "README.md", "before \xff after")
		if got, err := readReadme(dir); err != nil || got != "before \uFFFD after" {
			t.Fatalf("got %q, %v", got, err)
		}
	})
}
