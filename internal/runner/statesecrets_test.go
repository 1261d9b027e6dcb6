package runner

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestStateSecrets: the values a state holds at sensitive paths are
// found in nested objects, lists, maps, dynamic-typed attributes (a real
// terraform 1.5.7 terraform_data instance), strings holding JSON and
// sensitive outputs; plain values, booleans, short values and paths that
// lead nowhere give nothing.
func TestStateSecrets(t *testing.T) {
	t.Parallel()
	state, err := os.ReadFile("testdata/state-sensitive.json")
	if err != nil {
		t.Fatal(err)
	}
	got := stateSecrets(state)
	want := []string{
		"old-input-secret",                       // terraform_data input.a[0], inside the dynamic wrapper
		"old-output-secret",                      // output o
		"admin-user", "out-list-secret", "31337", // output nested: object, list, number
		"pw-top-secret",                         // a top-level attribute
		"tok-in-list",                           // config[0].token
		"k-in-map",                              // tags["api_key"]
		"json-inner-secret", "json-list-secret", // leaves of a jsonencoded string
		"54321",            // a number
		"dyn-whole-secret", // a whole dynamic attribute: its value, not its type
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("stateSecrets lacks %q: %q", w, got)
		}
	}
	var jsonWhole string
	for _, s := range got {
		if strings.Contains(s, "json-inner-secret") && s != "json-inner-secret" {
			jsonWhole = s
		}
	}
	if jsonWhole == "" {
		t.Errorf("the jsonencoded string is not masked whole: %q", got)
	}
	for _, plain := range []string{"visible-output", "visible-name", "prod-visible", "plain", "thing-1", "true", "ab", "string", "object", "tuple"} {
		if slices.Contains(got, plain) {
			t.Errorf("stateSecrets holds the plain value %q: %q", plain, got)
		}
	}
	if len(got) != len(want)+1 {
		t.Errorf("stateSecrets gave %d values, want %d: %q", len(got), len(want)+1, got)
	}

	for _, bad := range []string{"", "not json", `{"resources": "no"}`, "null"} {
		if s := stateSecrets([]byte(bad)); len(s) != 0 {
			t.Errorf("stateSecrets(%q) = %q, want nothing", bad, s)
		}
	}
}

// TestMaskList: a job masks the state's old secrets and the server's
// mask-only values beside the current sensitive variables, longest first,
// each once, and never a plain variable or a value shorter than 3.
func TestMaskList(t *testing.T) {
	t.Parallel()
	state, err := os.ReadFile("testdata/state-sensitive.json")
	if err != nil {
		t.Fatal(err)
	}
	vars := []Variable{
		{Key: "secret", Value: "new-current-secret", Category: "terraform", Sensitive: true},
		{Key: "again", Value: "pw-top-secret", Category: "terraform", Sensitive: true},
		{Key: "plain", Value: "visible-name", Category: "terraform"},
	}
	got := maskList(&Inputs{State: state, Masks: []string{"prev-run-secret", "ab"}, Token: "run-token-secret.atlasv1.x"}, vars)
	for _, w := range []string{"new-current-secret", "old-input-secret", "pw-top-secret", "prev-run-secret", "run-token-secret.atlasv1.x"} {
		if !slices.Contains(got, w) {
			t.Errorf("maskList lacks %q: %q", w, got)
		}
	}
	if slices.Contains(got, "visible-name") || slices.Contains(got, "ab") {
		t.Errorf("maskList holds a plain variable: %q", got)
	}
	seen := map[string]bool{}
	for i, s := range got {
		if seen[s] {
			t.Errorf("maskList holds %q twice", s)
		}
		seen[s] = true
		if i > 0 && len(got[i-1]) < len(s) {
			t.Errorf("maskList is not longest first: %q before %q", got[i-1], s)
		}
	}
	if got := maskReplacer(got).Replace(`- "old-input-secret" -> "new-current-secret"`); got != `- "***" -> "***"` {
		t.Errorf("masked line %q", got)
	}
}

// TestRedactMasksSecrets: a previous secret that terraform left unmarked
// (terraform_data's output copies a sensitive input) is masked in the
// redacted plan JSON wherever it is, and a number that is a secret is
// nulled; other values keep their form (a value marked sensitive becomes
// its stand-in).
func TestRedactMasksSecrets(t *testing.T) {
	t.Parallel()
	plan := []byte(`{"format_version":"1.2",
	 "resource_changes":[{"address":"terraform_data.s","change":{"actions":["delete","create"],
	   "before":{"input":"(masked by marks)","output":"old-input-secret","n":54321,"big":12345678901234567890},
	   "before_sensitive":{"input":true},"after":{"input":"x"},"after_sensitive":{}}}],
	 "prior_state":{"values":{"root_module":{"resources":[{"values":{"output":"prefix-old-input-secret"},"sensitive_values":{}}]}}}}`)
	red := Redact(plan, nil, []string{"old-input-secret", "54321"})
	if red == nil {
		t.Fatal("Redact failed")
	}
	if s := string(red); strings.Contains(s, "old-input-secret") || strings.Contains(s, "54321") {
		t.Fatalf("the redacted plan holds a secret: %s", s)
	}
	var p struct {
		ResourceChanges []struct {
			Change struct {
				Before map[string]json.RawMessage `json:"before"`
			} `json:"change"`
		} `json:"resource_changes"`
		PriorState struct {
			Values struct {
				RootModule struct {
					Resources []struct {
						Values map[string]string `json:"values"`
					} `json:"resources"`
				} `json:"root_module"`
			} `json:"values"`
		} `json:"prior_state"`
	}
	if err := json.Unmarshal(red, &p); err != nil {
		t.Fatal(err)
	}
	b := p.ResourceChanges[0].Change.Before
	if string(b["output"]) != `"***"` || string(b["n"]) != "null" || string(b["input"]) != `"`+standIn+`"` || string(b["big"]) != "12345678901234567890" {
		t.Fatalf("before %v", b)
	}
	if v := p.PriorState.Values.RootModule.Resources[0].Values["output"]; v != "prefix-***" {
		t.Fatalf("prior state output %q", v)
	}
}

// BenchmarkStateSecrets reads a state of 1000 terraform_data instances,
// each with a sensitive input, as a job does once before it starts.
func BenchmarkStateSecrets(b *testing.B) {
	state := benchState(1000)
	b.SetBytes(int64(len(state)))
	for b.Loop() {
		if got := stateSecrets(state); len(got) != 1000 {
			b.Fatalf("%d secrets", len(got))
		}
	}
}

// BenchmarkMaskLine masks one log line against the 1000 secrets of that
// state: the cost per log line of a workspace with that many.
func BenchmarkMaskLine(b *testing.B) {
	m := maskReplacer(maskList(&Inputs{State: benchState(1000)}, nil))
	line := `      ~ output = "secret-value-0500" -> (known after apply)` + "\n"
	for b.Loop() {
		if got := m.Replace(line); strings.Contains(got, "secret-value") {
			b.Fatal(got)
		}
	}
}

func benchState(n int) []byte {
	type inst struct {
		Attributes          map[string]any `json:"attributes"`
		SensitiveAttributes []any          `json:"sensitive_attributes"`
	}
	type res struct {
		Type      string `json:"type"`
		Instances []inst `json:"instances"`
	}
	st := struct {
		Version   int   `json:"version"`
		Resources []res `json:"resources"`
	}{Version: 4}
	for i := range n {
		v := fmt.Sprintf("secret-value-%04d", i)
		st.Resources = append(st.Resources, res{Type: "terraform_data", Instances: []inst{{
			Attributes:          map[string]any{"id": fmt.Sprint(i), "input": map[string]any{"value": v, "type": "string"}, "output": map[string]any{"value": v, "type": "string"}},
			SensitiveAttributes: []any{[]any{map[string]any{"type": "get_attr", "value": "input"}}},
		}}})
	}
	b, err := json.Marshal(st)
	if err != nil {
		panic(err)
	}
	return b
}
