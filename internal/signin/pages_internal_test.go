package signin

import (
	"log/slog"
	"testing"

	"github.com/terracehq/terrace/internal/ui"
)

// TestEveryPageParses parses each sign-in page with the UI's layout: the
// pages are parsed on first use, so this is where one that does not parse
// fails.
func TestEveryPageParses(t *testing.T) {
	p, err := ui.NewPages(templateFiles, slog.Default(), pageNames...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.ParseAll(); err != nil {
		t.Fatal(err)
	}
}
