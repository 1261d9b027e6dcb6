package orchestrator

import (
	"fmt"
	"sort"
	"strings"
)

// Placeholders are ${…} expressions inside strings of module inputs,
// request params, workload outputs and provider configuration:
//
//	${context.<key>}                                  org_id, project_id, env_id, env_type_id; in modules also res_type, res_class, res_id
//	${resources.<alias>.outputs.<key>[.<key>…]}       a dependency (module) or workload resource (manifest) by alias
//	${shared.<alias>.outputs.<key>…}                  a shared resource (workload outputs and params only)
//	${self.outputs.<key>…}                            the current node (modules only)
//	${select.<step>[.<step>…].outputs.<key>…}         step = consumers('<f>') | dependencies('<f>'), f = type[.class][#id]
//	${var.<KEY>}                                      a root variable (provider configuration only)
//
// A literal "${" is written "$\{". A string that is exactly one placeholder
// keeps the referenced value's type; see render.go for how placeholders
// become Terraform expressions.

type refKind uint

const (
	refContext refKind = 1 << iota
	refResources
	refShared
	refSelf
	refSelect
	refVar
)

func kindSet(kinds ...refKind) refKind {
	var s refKind
	for _, k := range kinds {
		s |= k
	}
	return s
}

func (k refKind) String() string {
	switch k {
	case refContext:
		return "context"
	case refResources:
		return "resources"
	case refShared:
		return "shared"
	case refSelf:
		return "self"
	case refSelect:
		return "select"
	case refVar:
		return "var"
	}
	return "?"
}

// ref is one parsed placeholder.
type ref struct {
	kind  refKind
	key   string       // context key or var name
	alias string       // resources/shared alias
	steps []selectStep // select chain
	path  []string     // output path after "outputs."
	raw   string       // the placeholder text without ${ }
}

// selectStep moves one hop to consumers (nodes depending on the node) or
// dependencies, keeping the nodes that match the filter.
type selectStep struct {
	consumers bool
	typ       string
	class     string // "" = any; may contain "@"
	id        string // "" = any; may contain "@"
}

// tplPart is a literal (ref == nil) or a placeholder.
type tplPart struct {
	lit string
	ref *ref
}

type template []tplPart

func (t template) refs() []*ref {
	var out []*ref
	for _, p := range t {
		if p.ref != nil {
			out = append(out, p.ref)
		}
	}
	return out
}

// bare returns the placeholder when the string is exactly one placeholder.
func (t template) bare() *ref {
	if len(t) == 1 && t[0].ref != nil {
		return t[0].ref
	}
	return nil
}

// literal returns the text of a template without placeholders.
func (t template) literal() (string, bool) {
	var b strings.Builder
	for _, p := range t {
		if p.ref != nil {
			return "", false
		}
		b.WriteString(p.lit)
	}
	return b.String(), true
}

// parseTemplate splits s into literals and placeholders.
func parseTemplate(s string) (template, error) {
	if !strings.Contains(s, "${") && !strings.Contains(s, `$\{`) {
		return template{{lit: s}}, nil
	}
	var t template
	var lit strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], `$\{`):
			lit.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexAny(s[i+2:], "{}")
			if end < 0 || s[i+2+end] != '}' {
				return nil, fmt.Errorf("unterminated placeholder at %q (write $\\{ for a literal ${)", clip(s[i:]))
			}
			body := s[i+2 : i+2+end]
			r, err := parseRef(body)
			if err != nil {
				return nil, err
			}
			if lit.Len() > 0 {
				t = append(t, tplPart{lit: lit.String()})
				lit.Reset()
			}
			t = append(t, tplPart{ref: r})
			i += 2 + end + 1
		default:
			lit.WriteByte(s[i])
			i++
		}
	}
	if lit.Len() > 0 || len(t) == 0 {
		t = append(t, tplPart{lit: lit.String()})
	}
	return t, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

func isKey(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// parseOutputs parses "outputs.<key>[.<key>…]".
func parseOutputs(body, s string) ([]string, error) {
	rest, ok := strings.CutPrefix(s, "outputs.")
	if !ok {
		return nil, fmt.Errorf("placeholder ${%s}: expected \"outputs.<key>\" after the resource", body)
	}
	path := strings.Split(rest, ".")
	for _, k := range path {
		if !isKey(k) {
			return nil, fmt.Errorf("placeholder ${%s}: %q is not a valid output key", body, k)
		}
	}
	return path, nil
}

func parseRef(body string) (*ref, error) {
	head, rest, _ := strings.Cut(body, ".")
	r := &ref{raw: body}
	var err error
	switch head {
	case "context":
		r.kind = refContext
		if !isKey(rest) {
			return nil, fmt.Errorf("placeholder ${%s}: expected context.<key>", body)
		}
		if !contextKeys[rest] {
			return nil, fmt.Errorf("placeholder ${%s}: unknown context key %q (known: org_id, project_id, env_id, env_type_id, res_type, res_class, res_id)", body, rest)
		}
		r.key = rest
	case "var":
		r.kind = refVar
		if !keyRE.MatchString(rest) {
			return nil, fmt.Errorf("placeholder ${%s}: expected var.<NAME>", body)
		}
		r.key = rest
	case "resources", "shared":
		r.kind = refResources
		if head == "shared" {
			r.kind = refShared
		}
		alias, outs, ok := strings.Cut(rest, ".")
		if !ok || !isKey(alias) {
			return nil, fmt.Errorf("placeholder ${%s}: expected %s.<alias>.outputs.<key>", body, head)
		}
		r.alias = alias
		if r.path, err = parseOutputs(body, outs); err != nil {
			return nil, err
		}
	case "self":
		r.kind = refSelf
		if r.path, err = parseOutputs(body, rest); err != nil {
			return nil, err
		}
	case "select":
		r.kind = refSelect
		for !strings.HasPrefix(rest, "outputs.") {
			var step selectStep
			var fn string
			switch {
			case strings.HasPrefix(rest, "consumers('"):
				fn, step.consumers = "consumers('", true
			case strings.HasPrefix(rest, "dependencies('"):
				fn = "dependencies('"
			default:
				return nil, fmt.Errorf("placeholder ${%s}: expected consumers('<filter>'), dependencies('<filter>') or outputs.<key> at %q", body, clip(rest))
			}
			filter, after, ok := strings.Cut(rest[len(fn):], "')")
			if !ok {
				return nil, fmt.Errorf("placeholder ${%s}: unterminated %s…')", body, fn)
			}
			left, id, _ := strings.Cut(filter, "#")
			typ, class, _ := strings.Cut(left, ".")
			if !typeRE.MatchString(typ) {
				return nil, fmt.Errorf("placeholder ${%s}: filter %q needs a resource type (type[.class][#id])", body, filter)
			}
			if class != "" && !typeRE.MatchString(strings.ReplaceAll(class, "@", "x0")) {
				return nil, fmt.Errorf("placeholder ${%s}: filter %q has an invalid class", body, filter)
			}
			if id != "" && !resourceIDRE.MatchString(strings.ReplaceAll(id, "@", "x0")) {
				return nil, fmt.Errorf("placeholder ${%s}: filter %q has an invalid id", body, filter)
			}
			step.typ, step.class, step.id = typ, class, id
			r.steps = append(r.steps, step)
			rest, ok = strings.CutPrefix(after, ".")
			if !ok {
				return nil, fmt.Errorf("placeholder ${%s}: expected \".outputs.<key>\" after the select chain", body)
			}
		}
		if len(r.steps) == 0 {
			return nil, fmt.Errorf("placeholder ${%s}: select needs at least one consumers() or dependencies() step", body)
		}
		if r.path, err = parseOutputs(body, rest); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("placeholder ${%s}: unknown kind %q (want context, resources, shared, self, select or var)", body, head)
	}
	return r, nil
}

// allowed says which placeholders a field may use.
type allowed struct {
	kinds       refKind
	contextKeys map[string]bool
	// aliases and shared are the names resources.<alias> and
	// shared.<alias> may use.
	aliases map[string]Request
	shared  map[string]Request
}

var (
	allowModule   = allowed{kinds: kindSet(refContext, refResources, refSelect, refSelf), contextKeys: contextKeys}
	allowProvider = allowed{kinds: kindSet(refContext, refVar), contextKeys: manifestCtxKeys}
)

func (a allowed) withAliases(deps map[string]Request) allowed {
	a.aliases = deps
	return a
}

// check returns why r is not allowed here, or "".
func (a allowed) check(r *ref) string {
	if a.kinds&r.kind == 0 {
		var names []string
		for k := refContext; k <= refVar; k <<= 1 {
			if a.kinds&k != 0 {
				names = append(names, k.String())
			}
		}
		return fmt.Sprintf("placeholder ${%s}: %s placeholders are not allowed here (allowed: %s)", r.raw, r.kind, strings.Join(names, ", "))
	}
	switch r.kind {
	case refContext:
		if !a.contextKeys[r.key] {
			keys := sortedKeys(a.contextKeys)
			return fmt.Sprintf("placeholder ${%s}: context.%s is not available here (available: %s)", r.raw, r.key, strings.Join(keys, ", "))
		}
	case refResources:
		if _, ok := a.aliases[r.alias]; !ok {
			return fmt.Sprintf("placeholder ${%s}: no resource with alias %q here (aliases: %s)", r.raw, r.alias, strings.Join(sortedKeys(a.aliases), ", "))
		}
	case refShared:
		if _, ok := a.shared[r.alias]; !ok {
			return fmt.Sprintf("placeholder ${%s}: no shared resource with alias %q (shared: %s)", r.raw, r.alias, strings.Join(sortedKeys(a.shared), ", "))
		}
	}
	return ""
}

// walkStrings calls fn for every string in v (maps in key order), with its
// field path.
func walkStrings(v any, path string, fn func(path, s string)) {
	switch x := v.(type) {
	case string:
		fn(path, x)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			walkStrings(x[k], path+"."+k, fn)
		}
	case []any:
		for i, e := range x {
			walkStrings(e, fmt.Sprintf("%s[%d]", path, i), fn)
		}
	}
}
