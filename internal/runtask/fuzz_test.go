package runtask

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// FuzzDecodeCallback feeds the run task callback body (PATCH
// /api/v2/task-results/:id/callback) through the handler's decoding and
// validation. Nothing panics, and a report that validates keeps its
// outcomes through the JSON they are stored as.
func FuzzDecodeCallback(f *testing.F) {
	for _, seed := range []string{
		`{"data":{"type":"task-results","attributes":{"status":"passed","message":"ok","url":"https://x"}}}`,
		`{"data":{"type":"task-results","attributes":{"status":"running"}}}`,
		`{"data":{"type":"task-results","attributes":{"status":"failed","message":"no"},"relationships":{"outcomes":{"data":[{"type":"task-result-outcomes","attributes":{"outcome-id":"o1","description":"d","body":"# b","url":"https://u","tags":{"Status":[{"label":"Denied","level":"error"}],"Cost":[{"label":"$3"}]}}}]}}}}`,
		`{"data":{"type":"task-results","attributes":{"status":"passed"},"relationships":{"outcomes":{"data":null}}}}`,
		`{"data":{"type":"task-results","attributes":{"status":"passed"},"relationships":{"outcomes":{"data":{"type":"x"}}}}}`,
		`{"data":{"type":"task-results","attributes":{"status":"passed"},"relationships":{"outcomes":{"data":[{"type":"other"}]}}}}`,
		`{"data":{"type":"runs","attributes":{"status":"passed"}}}`,
		`{"data":{"attributes":{"status":7}}}`, `{}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		doc, err := tfeapi.DecodeBytes(body)
		if err != nil {
			return
		}
		rep, err := DecodeCallback(doc)
		if err != nil {
			return
		}
		if rep.Validate() != nil {
			return
		}
		if rep.Outcomes == nil {
			return
		}
		var back []Outcome
		if err := json.Unmarshal([]byte(jsonText(rep.Outcomes)), &back); err != nil {
			t.Fatalf("stored outcomes do not read back: %v", err)
		}
		if !reflect.DeepEqual(normal(back), normal(rep.Outcomes)) {
			t.Fatalf("outcomes changed through storage:\n%#v\n%#v", rep.Outcomes, back)
		}
	})
}

// normal makes empty tag maps and lists nil, as omitempty stores them.
func normal(os []Outcome) []Outcome {
	out := make([]Outcome, len(os))
	for i, o := range os {
		if len(o.Tags) == 0 {
			o.Tags = nil
		}
		for k, v := range o.Tags {
			if len(v) == 0 {
				o.Tags[k] = nil
			}
		}
		out[i] = o
	}
	return out
}
