package tfeapi

import (
	"testing"
)

// FuzzDecodeBytes feeds arbitrary bodies to the request decoder: it must
// never panic, and whatever it accepts must decode attributes and
// relationships without panicking either.
func FuzzDecodeBytes(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `{"data":null}`, `{"comment":"lgtm"}`,
		`{"data":{"type":"","attributes":{"reason":"because"}}}`,
		`{"data":{"type":"workspaces","id":"ws-1","attributes":{"name":"x","auto-apply":true},"relationships":{"project":{"data":{"type":"projects","id":"prj-1"}}}}}`,
		`{"data":{"attributes":{},"relationships":{"vars":{"data":[{"type":"vars","attributes":{"key":"k"}}]}}}}`,
		`{"data":[1,2]}`, `[]`, `{"data":{"id":7}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := DecodeBytes(body)
		if err != nil {
			return
		}
		var attrs struct {
			Name      *string `json:"name"`
			AutoApply *bool   `json:"auto-apply"`
		}
		_ = doc.Attrs(&attrs)
		for name := range doc.Relationships {
			_, _ = doc.RelID(name)
			_, _ = doc.RelResources(name)
		}
	})
}
