package runner

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
)

// A job masks more than the current sensitive variables. terraform prints
// an attribute's previous value in the next plan ("- \"old\"" in a diff),
// and an attribute that a provider derived from a sensitive input is not
// always marked sensitive itself (terraform_data's output copies a
// sensitive input unmarked). So once a sensitive variable's value changes,
// its old value is known only to the workspace's current state: the
// values at the paths the state marks sensitive, and its sensitive
// outputs. The runner reads them from the state the job already carries
// (no second download) and masks them like the variables. They are never
// variables, never written anywhere: they only live in the masker.

// stateSecrets returns the values the state (terraform's JSON state, any
// format version 4 engine) holds at sensitive paths: each resource
// instance's sensitive_attributes and every output with sensitive: true.
// Strings are taken whole, and a string holding JSON (jsonencode) also
// gives its leaves, as terraform renders such a string decoded in a diff;
// numbers are taken as terraform prints them; booleans and null are not
// secrets. A state that cannot be read gives nothing.
func stateSecrets(state []byte) []string {
	if len(state) == 0 {
		return nil
	}
	var st struct {
		Outputs map[string]struct {
			Value     any  `json:"value"`
			Sensitive bool `json:"sensitive"`
		} `json:"outputs"`
		Resources []struct {
			Instances []struct {
				Attributes          map[string]any `json:"attributes"`
				SensitiveAttributes []statePath    `json:"sensitive_attributes"`
			} `json:"instances"`
		} `json:"resources"`
	}
	d := json.NewDecoder(bytes.NewReader(state))
	d.UseNumber()
	if err := d.Decode(&st); err != nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	add := func(v any) {
		leaves(v, func(s string) {
			if len(s) >= 3 && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		})
	}
	for _, o := range st.Outputs {
		if o.Sensitive {
			add(o.Value)
		}
	}
	for _, r := range st.Resources {
		for _, in := range r.Instances {
			for _, p := range in.SensitiveAttributes {
				if v, ok := p.follow(in.Attributes); ok {
					add(v)
				}
			}
		}
	}
	sort.Strings(out) // a stable order; the masker sorts by length
	return out
}

// statePath is one sensitive path of a resource instance: steps like
// {"type":"get_attr","value":"input"} and
// {"type":"index","value":{"value":0,"type":"number"}}.
type statePath []struct {
	Type  string          `json:"type"`
	Value json.RawMessage `json:"value"`
}

// follow returns the value at the path in an instance's attributes; ok is
// false when the path leads nowhere (a shape this reader does not know is
// skipped, not guessed at).
//
// An attribute of dynamic type (terraform_data's input and output) is
// stored as {"value": …, "type": …} while the path names the steps
// inside the value, so such a wrapper is looked through.
func (p statePath) follow(attrs map[string]any) (any, bool) {
	var cur any = attrs
	for _, step := range p {
		cur = unwrapDynamic(cur)
		switch step.Type {
		case "get_attr":
			var name string
			m, ok := cur.(map[string]any)
			if !ok || json.Unmarshal(step.Value, &name) != nil {
				return nil, false
			}
			if cur, ok = m[name]; !ok {
				return nil, false
			}
		case "index":
			var key struct {
				Value json.RawMessage `json:"value"`
				Type  string          `json:"type"`
			}
			if json.Unmarshal(step.Value, &key) != nil {
				return nil, false
			}
			switch c := cur.(type) {
			case []any:
				i, err := strconv.Atoi(string(key.Value))
				if err != nil || i < 0 || i >= len(c) {
					return nil, false
				}
				cur = c[i]
			case map[string]any:
				var name string
				if json.Unmarshal(key.Value, &name) != nil {
					return nil, false
				}
				v, ok := c[name]
				if !ok {
					return nil, false
				}
				cur = v
			default:
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return unwrapDynamic(cur), len(p) > 0
}

// unwrapDynamic returns the value of a dynamic-typed attribute's wrapper
// ({"value": v, "type": t} with t a type constraint as terraform writes
// it: "string", "number", "bool", "dynamic" or ["object", …] and the
// like); anything else as it is.
func unwrapDynamic(v any) any {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 2 {
		return v
	}
	inner, hasValue := m["value"]
	if !hasValue {
		return v
	}
	switch t := m["type"].(type) {
	case string:
		if t == "string" || t == "number" || t == "bool" || t == "dynamic" {
			return inner
		}
	case []any:
		if len(t) == 2 {
			switch kind, _ := t[0].(string); kind {
			case "object", "tuple", "list", "map", "set":
				return inner
			}
		}
	}
	return v
}

// leaves calls fn with every string and number in v, and with the leaves
// of a string that holds a JSON object or array.
func leaves(v any, fn func(string)) {
	switch x := v.(type) {
	case string:
		fn(x)
		if t := strings.TrimSpace(x); strings.HasPrefix(t, "{") || strings.HasPrefix(t, "[") {
			d := json.NewDecoder(strings.NewReader(t))
			d.UseNumber()
			var inner any
			if d.Decode(&inner) == nil {
				leaves(inner, fn)
			}
		}
	case json.Number:
		fn(x.String())
	case map[string]any:
		for _, e := range x {
			leaves(e, fn)
		}
	case []any:
		for _, e := range x {
			leaves(e, fn)
		}
	}
}

// maskList is what a job masks: the current sensitive variables (with the
// run's), the values the current state holds at sensitive paths, the
// mask-only values the server sent (Inputs.Masks) and the run's token. Longest first, so that
// a secret containing another is masked whole; no value shorter than 3.
func maskList(in *Inputs, vars []Variable) []string {
	seen := map[string]bool{}
	var out []string
	// The run's token too: a configuration can read terraform's CLI
	// configuration, and its log is no place for the token.
	for _, group := range [][]string{sortedSecrets(vars), stateSecrets(in.State), in.Masks, {in.Token}} {
		for _, s := range group {
			if len(s) >= 3 && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	sort.SliceStable(out, func(a, b int) bool { return len(out[a]) > len(out[b]) })
	return out
}
