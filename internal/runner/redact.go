package runner

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
)

// Redact returns a plan's JSON (terraform show -json) with every value
// marked sensitive replaced: in resource changes and drift (by their
// before/after_sensitive masks) and output changes by a stand-in
// (redactChange), in outputs, planned values, prior state, and variables
// that are declared sensitive or set as sensitive in Terrace by null.
// The masks stay, so renderers still print "(sensitive value)".
//
// Then every secret (the values the job masks in its logs, maskList) left
// in a string is replaced by *** as in the logs, and a number that is a
// secret becomes null: terraform does not mark every value derived from a
// sensitive one (terraform_data's output copies its sensitive input
// unmarked), and a previous value lives on in prior_state and a change's
// before.
func Redact(planJSON []byte, sensitiveVars map[string]bool, secrets []string) []byte {
	var p map[string]any
	d := json.NewDecoder(bytes.NewReader(planJSON))
	d.UseNumber()
	if err := d.Decode(&p); err != nil {
		return nil
	}
	for _, key := range []string{"resource_changes", "resource_drift"} {
		for _, rc := range asSlice(p[key]) {
			change, _ := asMap(rc)["change"].(map[string]any)
			if change == nil {
				continue
			}
			redactChange(change)
		}
	}
	if oc, ok := p["output_changes"].(map[string]any); ok {
		for _, v := range oc {
			if change := asMap(v); change != nil {
				redactChange(change)
			}
		}
	}
	for _, key := range []string{"planned_values", "prior_state"} {
		root := asMap(p[key])
		if key == "prior_state" {
			root = asMap(root["values"])
		}
		redactValues(root)
	}
	// Variables: declared sensitive in the root module, or set sensitive.
	declared := map[string]bool{}
	if cfg := asMap(asMap(p["configuration"])["root_module"]); cfg != nil {
		for name, v := range asMap(cfg["variables"]) {
			if s, _ := asMap(v)["sensitive"].(bool); s {
				declared[name] = true
			}
		}
	}
	for name, v := range asMap(p["variables"]) {
		if declared[name] || sensitiveVars[name] {
			asMap(v)["value"] = nil
		}
	}
	if m := maskReplacer(secrets); m != nil {
		numbers := map[string]bool{}
		for _, sec := range secrets {
			numbers[sec] = true
		}
		for k, v := range p {
			p[k] = maskValue(v, m, numbers)
		}
	}
	out, err := json.Marshal(p)
	if err != nil {
		return nil
	}
	return out
}

// redactValues walks a values tree (outputs and resources of a module and
// its children).
func redactValues(mod map[string]any) {
	if mod == nil {
		return
	}
	for _, o := range asMap(mod["outputs"]) {
		om := asMap(o)
		if s, _ := om["sensitive"].(bool); s {
			om["value"] = nil
		}
	}
	rm := asMap(mod["root_module"])
	if rm == nil {
		rm = mod
	}
	redactModule(rm)
}

func redactModule(m map[string]any) {
	for _, r := range asSlice(m["resources"]) {
		rmap := asMap(r)
		rmap["values"] = redactBy(rmap["values"], rmap["sensitive_values"])
	}
	for _, c := range asSlice(m["child_modules"]) {
		redactModule(asMap(c))
	}
}

// Stand-ins of a sensitive value in a change's before and after: never
// the value nor anything made from it, but not null, as terraform's
// cloud backend renders a change whose value is null as no change (it
// left out "+ secret = (sensitive value)"), where HCP Terraform's
// redacted plan has a stand-in string. They have the value's JSON type
// (the renderer reads a resource's attributes by their schema's type):
// a string, a number, a bool, an empty object or array. Before and after
// get the same stand-in when the values are equal, different ones when
// not (a collection that changed gets one element), so the renderer
// tells a changed sensitive value from an unchanged one, as terraform
// does with the values: whether a value changed is all it learns.
const standIn, standInChanged = "(sensitive)", "(sensitive, changed)"

// redactChange replaces the sensitive parts of a change's before and
// after by stand-ins (standIn).
func redactChange(change map[string]any) {
	// Each side is compared with the other as it was.
	before, after := change["before"], change["after"]
	was, will := clone(before), clone(after)
	change["before"] = redactPair(before, will, change["before_sensitive"], false)
	change["after"] = redactPair(after, was, change["after_sensitive"], true)
}

// clone copies a decoded JSON value deeply.
func clone(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = clone(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = clone(e)
		}
		return out
	}
	return v
}

// redactPair is redactBy with stand-ins for v, one side of a change;
// other is the other side, to compare with; after says which side v is.
func redactPair(v, other, mask any, after bool) any {
	switch m := mask.(type) {
	case bool:
		if !m {
			return v
		}
		if v == nil {
			return nil // null (or unknown) stays so
		}
		return standInFor(v, after && !reflect.DeepEqual(v, other))
	case map[string]any:
		vm, ok := v.(map[string]any)
		if !ok {
			return v
		}
		om, _ := other.(map[string]any)
		for k, sub := range m {
			if _, present := vm[k]; present {
				vm[k] = redactPair(vm[k], om[k], sub, after)
			}
		}
		return vm
	case []any:
		vs, ok := v.([]any)
		if !ok {
			return v
		}
		ol, _ := other.([]any)
		for i := range vs {
			if i < len(m) {
				var o any
				if i < len(ol) {
					o = ol[i]
				}
				vs[i] = redactPair(vs[i], o, m[i], after)
			}
		}
		return vs
	}
	return v
}

// standInFor returns the stand-in of a sensitive value of v's JSON type;
// changed picks the other stand-in.
func standInFor(v any, changed bool) any {
	switch v.(type) {
	case string:
		if changed {
			return standInChanged
		}
		return standIn
	case json.Number:
		if changed {
			return json.Number("1")
		}
		return json.Number("0")
	case bool:
		return changed
	case map[string]any:
		if changed {
			return map[string]any{standInChanged: standInChanged}
		}
		return map[string]any{}
	case []any:
		if changed {
			return []any{standInChanged}
		}
		return []any{}
	}
	return nil
}

// redactBy nulls the parts of v that mask marks as sensitive (mask is true,
// or an object/array of the same shape).
func redactBy(v, mask any) any {
	switch m := mask.(type) {
	case bool:
		if m {
			return nil
		}
		return v
	case map[string]any:
		vm, ok := v.(map[string]any)
		if !ok {
			return v
		}
		for k, sub := range m {
			if _, present := vm[k]; present {
				vm[k] = redactBy(vm[k], sub)
			}
		}
		return vm
	case []any:
		vs, ok := v.([]any)
		if !ok {
			return v
		}
		for i := range vs {
			if i < len(m) {
				vs[i] = redactBy(vs[i], m[i])
			}
		}
		return vs
	}
	return v
}

// maskValue replaces the secrets in every string of v (longest first,
// as the log masker does) and nulls a number that is one (secrets holds
// them as text).
func maskValue(v any, m *strings.Replacer, secrets map[string]bool) any {
	switch x := v.(type) {
	case string:
		return m.Replace(x)
	case json.Number:
		if secrets[x.String()] {
			return nil
		}
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = maskValue(e, m, secrets)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = maskValue(e, m, secrets)
		}
		return x
	}
	return v
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }
func asSlice(v any) []any        { s, _ := v.([]any); return s }

// withProviderSchemas completes a redacted plan into the form HCP
// Terraform serves as json-output-redacted: terraform's cloud backend
// renders a run's plan from it when the workspace has structured run
// output, and needs plan_format_version, provider_format_version and the
// provider_schemas (terraform providers schema -json) to do so.
func withProviderSchemas(redacted, schemasJSON []byte) []byte {
	var p map[string]any
	var sc struct {
		FormatVersion   string         `json:"format_version"`
		ProviderSchemas map[string]any `json:"provider_schemas"`
	}
	if json.Unmarshal(redacted, &p) != nil || json.Unmarshal(schemasJSON, &sc) != nil {
		return redacted
	}
	if _, ok := p["plan_format_version"]; !ok {
		p["plan_format_version"] = p["format_version"]
	}
	p["provider_format_version"] = sc.FormatVersion
	p["provider_schemas"] = sc.ProviderSchemas
	out, err := json.Marshal(p)
	if err != nil {
		return redacted
	}
	return out
}
