package orchcli

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/terracehq/terrace/internal/orchestrator"
)

// FuzzReadManifest feeds arbitrary YAML to the manifest reader of
// `terrace deploy`/`graph`: it must never panic, and what it accepts must
// turn into the JSON body the API decodes.
func FuzzReadManifest(f *testing.F) {
	for _, s := range []string{
		"workloads:\n  api:\n    resources:\n      ns: {type: k8s-namespace}\n    outputs:\n      NS: ${resources.ns.outputs.name}\n",
		"shared:\n  db: {type: postgres, params: {size: 3, tags: [a, b]}}\n",
		"{}", "[]", "a: &x [*x]", "? [a, b]\n: c\n", "1: {2: {3: 4}}", "!!binary aGVsbG8=", "a: !!float .inf",
		"workloads: {w: {resources: {a: {type: t, params: {x: ~}}}}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		m, err := readManifest(bytes.NewReader(text), "-")
		if err != nil {
			return
		}
		body, err := json.Marshal(m)
		if err != nil {
			// YAML values JSON cannot carry (±Inf, NaN) are the API's to
			// refuse; what matters is no panic.
			return
		}
		var man orchestrator.Manifest
		if json.Unmarshal(body, &man) == nil {
			_ = man.Validate()
		}
	})
}
