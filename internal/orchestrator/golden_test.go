package orchestrator

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// caseFile is one graph case: a catalogue, a deployment context and a
// manifest (testdata/cases/<name>.json).
type caseFile struct {
	Catalogue Catalogue `json:"catalogue"`
	Context   Context   `json:"context"`
	Manifest  Manifest  `json:"manifest"`
}

func loadCase(t testing.TB, name string) caseFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "cases", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c caseFile
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	for _, m := range c.Catalogue.Modules {
		if err := m.Validate(); err != nil {
			t.Fatalf("%s: module %s: %v", name, m.ID, err)
		}
	}
	return c
}

// render is everything a compile produces, as text: the graph JSON, the
// Mermaid chart, the errors, and the Terraform files.
func render(t testing.TB, c caseFile) string {
	t.Helper()
	var b strings.Builder
	g, err := Compile(&c.Catalogue, c.Context, &c.Manifest)
	if err != nil {
		b.WriteString("== errors\n")
		if ce, ok := err.(*CompileError); ok {
			for _, e := range ce.Errors {
				b.WriteString(e.Node.String() + " [" + e.Code + "] " + e.Detail + "\n")
			}
		} else {
			b.WriteString(err.Error() + "\n")
		}
	}
	if g == nil {
		return b.String()
	}
	js, _ := json.MarshalIndent(g.JSON(), "", "  ")
	b.WriteString("== graph.json\n" + string(js) + "\n")
	b.WriteString("== mermaid\n" + g.Mermaid())
	if err != nil {
		return b.String()
	}
	files, err := g.Terraform()
	if err != nil {
		b.WriteString("== terraform error\n" + err.Error() + "\n")
		return b.String()
	}
	for _, p := range sortedKeys(files) {
		b.WriteString("== " + p + "\n" + string(files[p]))
		if !strings.HasSuffix(string(files[p]), "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -run %s -update to accept):\n--- got\n%s\n--- want\n%s", path, t.Name(), got, want)
	}
}

// TestGolden compiles every testdata/cases/*.json and compares the graph,
// the Mermaid chart, the errors and the Terraform with testdata/<name>.golden.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob(filepath.Join("testdata", "cases", "*.json"))
	if err != nil || len(cases) == 0 {
		t.Fatalf("no cases: %v", err)
	}
	for _, p := range cases {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			golden(t, name, render(t, loadCase(t, name)))
		})
	}
}
