package orchestrator

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// FuzzPlaceholder feeds arbitrary strings to the placeholder parser: it
// must never panic, and a string it reads as plain text must come back as
// that text (with $\{ unescaped).
func FuzzPlaceholder(f *testing.F) {
	for _, s := range []string{
		"", "plain", "${context.env_id}", "a-${resources.db.outputs.host}:${resources.db.outputs.port}",
		`$\{not.a.placeholder}`, "${shared.cache.outputs.url}", "${", "${}", "${resources.}", "${resources.x.outputs.}",
		"${context.org_id", "${x{y}}", "$${context.env_id}", "${resources.a.outputs.b.c.d}", "${externals.x.outputs.y}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tpl, err := parseTemplate(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an error without a message")
			}
			return
		}
		for _, r := range tpl.refs() {
			if r == nil {
				t.Fatal("a nil reference")
			}
		}
		_ = tpl.bare()
		if lit, ok := tpl.literal(); ok {
			if want := strings.ReplaceAll(s, `$\{`, "${"); lit != want {
				t.Fatalf("plain text %q read as %q, want %q", s, lit, want)
			}
		}
	})
}

// FuzzCompileManifest feeds arbitrary manifests (the JSON the API
// receives, which the CLI makes from YAML) to validation and, when they
// pass, to the graph compiler over a real catalogue: errors, never a
// panic.
func FuzzCompileManifest(f *testing.F) {
	raw, err := os.ReadFile("testdata/cases/dependency_example.json")
	if err != nil {
		f.Fatal(err)
	}
	var c caseFile
	if err := json.Unmarshal(raw, &c); err != nil {
		f.Fatal(err)
	}
	m, _ := json.Marshal(c.Manifest)
	f.Add(m)
	f.Add([]byte(`{"workloads":{"api":{"resources":{"ns":{"type":"current-type"}},"outputs":{"NS":"${resources.ns.outputs.id}"}}}}`))
	f.Add([]byte(`{"shared":{"db":{"type":"some-resource-type","params":{"key":"${context.env_id}"}}},"workloads":{"w":{"resources":{"a":{"type":"another-resource-type","params":{"ref":"${shared.db.outputs.x}"}}}}}}`))
	f.Add([]byte(`{"workloads":{"w":{"resources":{"a":{"type":"current-type","id":"x","class":"y"},"b":{"type":"current-type","id":"x"}}}}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var m Manifest
		if err := json.Unmarshal(body, &m); err != nil {
			return
		}
		if err := m.Validate(); err != nil {
			return
		}
		cat := c.Catalogue
		g, err := Compile(&cat, c.Context, &m)
		if err == nil && g == nil {
			t.Fatal("Compile returned neither a graph nor an error")
		}
		if g != nil {
			_ = g.Edges()
			_ = g.ProviderRefs()
		}
	})
}
