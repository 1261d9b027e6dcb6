package ui

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/terracehq/terrace/internal/nocode"
	"github.com/terracehq/terrace/internal/registry"
)

// TestEveryPageParses parses each of the UI's pages: they are parsed on
// first use, so this is where a template that does not parse fails.
func TestEveryPageParses(t *testing.T) {
	names, err := pageFiles()
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 15 {
		t.Fatalf("found %d pages: %v", len(names), names)
	}
	for _, want := range []string{"modules", "providers", "provider", "error"} {
		if _, ok := names[want]; !ok {
			t.Errorf("page %s is not among the pages found: %v", want, names)
		}
	}
	set, err := newPageSet(templateFS, names)
	if err != nil {
		t.Fatal(err)
	}
	if err := set.parseAll(); err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if tpl, err := set.get(name); err != nil || tpl.Lookup("content") == nil {
			t.Errorf("page %s: %v, or no content template", name, err)
		}
	}
}

// TestPageParsedOnFirstUse: a page is not parsed until it is rendered,
// a page that does not parse is a 500 with the reason logged (and the
// same answer the next time), and a missing file fails at once.
func TestPageParsedOnFirstUse(t *testing.T) {
	fsys := fstest.MapFS{
		"templates/good.html":   {Data: []byte(`{{define "content"}}hello {{.Data}}{{end}}`)},
		"templates/broken.html": {Data: []byte(`{{define "content"}}{{if}}{{end}}`)},
	}
	if _, err := newPageSet(fsys, map[string]string{"gone": "templates/gone.html"}); err == nil {
		t.Fatal("a page whose file is missing was accepted")
	}
	set, err := newPageSet(fsys, map[string]string{"good": "templates/good.html", "broken": "templates/broken.html"})
	if err != nil {
		t.Fatal(err)
	}
	var logged strings.Builder
	logger := slog.New(slog.NewTextHandler(&logged, nil))
	for range 2 {
		w := httptest.NewRecorder()
		writePage(w, httptest.NewRequest("GET", "/app/x", nil), logger, set, http.StatusOK, "broken", page{})
		if w.Code != http.StatusInternalServerError || !strings.Contains(logged.String(), "broken.html") {
			t.Fatalf("a page that does not parse: %d, log %q", w.Code, logged.String())
		}
	}
	w := httptest.NewRecorder()
	writePage(w, httptest.NewRequest("GET", "/app/x", nil), logger, set, http.StatusOK, "good", page{Data: "there"})
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "hello there") {
		t.Fatalf("the good page: %d %q", w.Code, w.Body.String())
	}
	if err := set.parseAll(); err == nil || !strings.Contains(err.Error(), "broken.html") {
		t.Fatalf("parseAll: %v, want the broken page's error", err)
	}
}

// DefaultText shows a string default unquoted, other values as compact
// JSON, and nothing for required or sensitive variables or a null
// default.
func TestProvisionFieldDefaultText(t *testing.T) {
	for _, c := range []struct {
		v    registry.Variable
		want string
	}{
		{registry.Variable{Default: json.RawMessage(`"ops"`)}, "ops"},
		{registry.Variable{Default: json.RawMessage(`[ "a", 1 ]`)}, `["a",1]`},
		{registry.Variable{Default: json.RawMessage(`{"k": true}`)}, `{"k":true}`},
		{registry.Variable{Default: json.RawMessage(`"s3cret"`), Sensitive: true}, ""},
		{registry.Variable{Required: true}, ""},
		{registry.Variable{Default: json.RawMessage(`null`)}, ""}, // optional, no value
	} {
		if got := (field{ModuleVariable: nocode.ModuleVariable{Variable: c.v}}).DefaultText(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.v, got, c.want)
		}
	}
}
