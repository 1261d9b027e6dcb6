package runner

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Redact returns a plan's JSON (terraform show -json) with every value
// marked sensitive replaced by null: resource changes and drift (by their
// before/after_sensitive masks), outputs, planned values, prior state, and
// variables that are declared sensitive or set as sensitive in Terrace.
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
			change["before"] = redactBy(change["before"], change["before_sensitive"])
			change["after"] = redactBy(change["after"], change["after_sensitive"])
		}
	}
	if oc, ok := p["output_changes"].(map[string]any); ok {
		for _, v := range oc {
			change := asMap(v)
			change["before"] = redactBy(change["before"], change["before_sensitive"])
			change["after"] = redactBy(change["after"], change["after_sensitive"])
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
