package orchestrator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// hclwrite (github.com/hashicorp/hcl/v2) writes the terraform and variable
// blocks and escapes every literal (strings, including "${" and "%{", and
// numbers), so user text can never break out of a string. Module, provider
// and output blocks are laid out by the small writer below in the layout
// terraform fmt produces (tests run terraform fmt -check): hclwrite's own
// formatter allocates 4 KiB per aligned token (a bufio.Scanner in its
// grapheme counter), which made a 10,000-node graph take 1.7 s to render.

type jsonNumber = json.Number

// Generated Terraform
//
// One root module (main.tf) with:
//   - terraform { required_providers { <provider_type> = {source, version} } }
//     for every provider a node's module maps; versions of providers of the
//     same type are joined into one constraint;
//   - provider "<provider_type>" { alias = "<provider id>" … configuration }
//     per provider; ${var.X} in configuration adds variable "X" (string,
//     sensitive) and ${context.…} is substituted;
//   - module "<block>" per node with a module (see blockName): source (and
//     version for a registry source "ns/name/provider@1.2.3"; inline modules
//     are "./modules/<module id>[/<version id>]"), providers = { local =
//     type.id }, module_inputs then params (params never overlap inputs),
//     depends_on = [module.<dependency>…] for every outgoing edge (through
//     module-less workload nodes to their dependencies);
//   - output "workloads" = { <workload> = { <key> = <expr> } } (sensitive);
//   - output "resources" = { "<type>.<class>#<id>" = module.<block> }
//     (sensitive): every node's module outputs, for the caller to store.
//
// Placeholders become expressions:
//   - context: the literal value (known at compile time);
//   - resources/shared/self: module.<block>.<key>[.<key>…] of the target
//     node (a key that is all digits becomes an index [N]);
//   - select: a tuple [module.<a>.<key>, …] of the matched nodes, sorted by
//     coordinate;
//   - var: var.<NAME>.
//
// A string that is exactly one placeholder becomes the bare expression and
// keeps its type. Inside other text the value is JSON-encoded, except that
// a string is embedded as is (JSON would add quotes): strings, numbers and
// bools interpolate as "${X}" (their JSON and string forms agree); objects,
// arrays and select results as "${jsonencode(X)}". The output type comes
// from the resource type's output_schema; where the schema does not say,
// the expression decides at run time:
// "${X == null ? "null" : try(tostring(X), jsonencode(X))}".

// Terraform renders the graph as a root module plus the inline modules'
// files: path (slash-separated, relative) → content. It fails only on
// inconsistencies Compile does not catch (two providers of one type with
// different sources, a placeholder pointing at a node without module).
func (g *Graph) Terraform() (map[string][]byte, error) {
	r := &renderer{g: g, vars: map[string]bool{}}
	files := map[string][]byte{}
	var out bytes.Buffer
	sep := func() {
		if out.Len() > 0 {
			out.WriteByte('\n')
		}
	}

	// providers
	used := map[string]*Provider{}
	for _, n := range g.Nodes {
		if n.Module == nil {
			continue
		}
		for _, ref := range n.Module.ProviderMapping {
			if p := g.providers[ref]; p != nil {
				used[ref] = p
			} else {
				r.errs = append(r.errs, fmt.Sprintf("%s: provider %q does not exist", n.Coord, ref))
			}
		}
		if n.Module.ModuleSourceCode != "" {
			files[inlineDir(n.Module)+"/main.tf"] = []byte(n.Module.ModuleSourceCode)
		}
	}
	for _, ref := range g.keep {
		if p := g.providers[ref]; p != nil {
			used[ref] = p
		}
	}
	refs := sortedKeys(used)
	if len(refs) > 0 {
		f := hclwrite.NewEmptyFile()
		rp := f.Body().AppendNewBlock("terraform", nil).Body().AppendNewBlock("required_providers", nil).Body()
		type req struct {
			source   string
			versions []string
		}
		byType := map[string]*req{}
		for _, ref := range refs {
			p := used[ref]
			q := byType[p.ProviderType]
			if q == nil {
				q = &req{source: p.Source}
				byType[p.ProviderType] = q
			} else if q.source != p.Source {
				r.errs = append(r.errs, fmt.Sprintf("providers of type %q have different sources (%q, %q)", p.ProviderType, q.source, p.Source))
			}
			if p.VersionConstraint != "" && !contains(q.versions, p.VersionConstraint) {
				q.versions = append(q.versions, p.VersionConstraint)
			}
		}
		for _, typ := range sortedKeys(byType) {
			q := byType[typ]
			sort.Strings(q.versions)
			attrs := map[string]cty.Value{"source": cty.StringVal(q.source)}
			if len(q.versions) > 0 {
				attrs["version"] = cty.StringVal(strings.Join(q.versions, ", "))
			}
			rp.SetAttributeValue(typ, cty.ObjectVal(attrs))
		}
		out.Write(f.Bytes())
		for _, ref := range refs {
			p := used[ref]
			sep()
			attrs := []hattr{{name: "alias", v: hv{line: quote(p.ID)}}}
			attrs = append(attrs, r.config(p.Configuration, "provider "+ref)...)
			writeBlock(&out, "", "provider "+quote(p.ProviderType), attrs)
		}
	}

	for _, n := range g.Nodes {
		if n.Module != nil {
			sep()
			writeBlock(&out, "", "module "+quote(n.Block), r.module(n))
		}
	}

	// outputs
	if len(g.Workloads) > 0 {
		var wl []hattr
		for _, name := range sortedKeys(g.Workloads) {
			w := g.Workloads[name]
			outs := []hattr{}
			for _, k := range sortedKeys(w.Outputs) {
				outs = append(outs, hattr{quote(k), r.value(w.Outputs[k], w.paramsScope, w.Coord.String()+" outputs."+k)})
			}
			wl = append(wl, hattr{quote(name), hv{obj: outs, isObj: true}})
		}
		sep()
		writeBlock(&out, "", `output "workloads"`, []hattr{
			{"value", hv{obj: wl, isObj: true}},
			{"sensitive", hv{line: "true"}},
		})
	}
	res := []hattr{}
	for _, n := range g.Nodes {
		if n.Module != nil {
			res = append(res, hattr{quote(n.Coord.String()), hv{line: moduleRef(n.Block, nil)}})
		}
	}
	sep()
	writeBlock(&out, "", `output "resources"`, []hattr{
		{"value", hv{obj: res, isObj: true}},
		{"sensitive", hv{line: "true"}},
	})

	if len(r.vars) > 0 {
		vf := hclwrite.NewEmptyFile()
		for i, v := range sortedKeys(r.vars) {
			if i > 0 {
				vf.Body().AppendNewline()
			}
			vb := vf.Body().AppendNewBlock("variable", []string{v}).Body()
			vb.SetAttributeTraversal("type", hcl.Traversal{hcl.TraverseRoot{Name: "string"}})
			vb.SetAttributeValue("sensitive", cty.True)
		}
		files["variables.tf"] = vf.Bytes()
	}
	if len(r.errs) > 0 {
		return nil, fmt.Errorf("cannot render the graph as Terraform: %s", strings.Join(r.errs, "; "))
	}
	files["main.tf"] = out.Bytes()
	return files, nil
}

// WriteTerraform writes the files of Terraform into dir.
func (g *Graph) WriteTerraform(dir string) error {
	files, err := g.Terraform()
	if err != nil {
		return err
	}
	for _, p := range sortedKeys(files) {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, files[p], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func inlineDir(m *Module) string {
	if m.VersionID != "" {
		return "modules/" + m.ID + "/" + m.VersionID
	}
	return "modules/" + m.ID
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// hv is a rendered value: a one-line expression, or (isObj) an object
// constructor laid out one attribute per line.
type hv struct {
	line  string
	obj   []hattr
	isObj bool
}

// hattr is an attribute (or object item): name is already rendered (an
// identifier or a quoted key).
type hattr struct {
	name string
	v    hv
}

// multiline reports whether the value is written over several lines.
func (v hv) multiline() bool { return v.isObj && len(v.obj) > 0 }

// inline is the value on one line: objects as { k = v, … }.
func (v hv) inline() string {
	if !v.isObj {
		return v.line
	}
	if len(v.obj) == 0 {
		return "{}"
	}
	parts := make([]string, len(v.obj))
	for i, a := range v.obj {
		parts[i] = a.name + " = " + a.v.inline()
	}
	return "{ " + strings.Join(parts, ", ") + " }"
}

// writeBlock writes `<head> {`, the attributes and `}` at indent.
func writeBlock(b *bytes.Buffer, indent, head string, attrs []hattr) {
	b.WriteString(indent + head + " {\n")
	writeAttrs(b, indent+"  ", attrs)
	b.WriteString(indent + "}\n")
}

// writeAttrs writes attributes the way terraform fmt lays them out: the "="
// of consecutive one-line attributes are aligned; an attribute whose value
// spans lines ends such a run. Nested blocks are attributes whose name is
// "\x00block <type>" (written as blocks after a run).
func writeAttrs(b *bytes.Buffer, indent string, attrs []hattr) {
	for i := 0; i < len(attrs); {
		a := attrs[i]
		if blk, ok := strings.CutPrefix(a.name, "\x00block "); ok {
			writeBlock(b, indent, blk, a.v.obj)
			i++
			continue
		}
		if a.v.multiline() {
			writeBlock(b, indent, a.name+" =", a.v.obj)
			i++
			continue
		}
		j, width := i, 0
		for ; j < len(attrs) && !attrs[j].v.multiline() && !strings.HasPrefix(attrs[j].name, "\x00"); j++ {
			if w := utf8.RuneCountInString(attrs[j].name); w > width {
				width = w
			}
		}
		for k := i; k < j; k++ {
			b.WriteString(indent)
			b.WriteString(attrs[k].name)
			for pad := width - utf8.RuneCountInString(attrs[k].name); pad > 0; pad-- {
				b.WriteByte(' ')
			}
			b.WriteString(" = ")
			b.WriteString(attrs[k].v.inline())
			b.WriteByte('\n')
		}
		i = j
	}
}

type renderer struct {
	g    *Graph
	vars map[string]bool
	errs []string
}

func (r *renderer) module(n *Node) []hattr {
	m := n.Module
	var attrs []hattr
	switch {
	case m.ModuleSourceCode != "":
		attrs = append(attrs, hattr{"source", hv{line: quote("./" + inlineDir(m))}})
	case !strings.HasPrefix(m.ModuleSource, "git::") && !strings.HasPrefix(m.ModuleSource, "/") && strings.Contains(m.ModuleSource, "@"):
		src, ver, _ := strings.Cut(m.ModuleSource, "@")
		attrs = append(attrs, hattr{"source", hv{line: quote(src)}}, hattr{"version", hv{line: quote(ver)}})
	default:
		attrs = append(attrs, hattr{"source", hv{line: quote(m.ModuleSource)}})
	}
	if len(m.ProviderMapping) > 0 {
		var ps []hattr
		for _, local := range sortedKeys(m.ProviderMapping) {
			ps = append(ps, hattr{local, hv{line: m.ProviderMapping[local]}})
		}
		attrs = append(attrs, hattr{"providers", hv{obj: ps, isObj: true}})
	}
	inScope := &scope{node: n, aliases: n.aliases, allow: allowModule.withAliases(m.Dependencies)}
	var vars []hattr
	// Params win over module_inputs (the seed's precedence).
	for _, k := range sortedKeys(m.ModuleInputs) {
		if _, ok := n.Params[k]; !ok {
			vars = append(vars, hattr{k, r.value(m.ModuleInputs[k], inScope, n.Coord.String()+" module_inputs."+k)})
		}
	}
	for _, k := range sortedKeys(n.Params) {
		vars = append(vars, hattr{k, r.value(n.Params[k], n.paramsScope, n.Coord.String()+" params."+k)})
	}
	sort.SliceStable(vars, func(i, j int) bool { return vars[i].name < vars[j].name })
	attrs = append(attrs, vars...)
	var deps []string
	seen := map[*Node]bool{}
	var walk func(x *Node)
	walk = func(x *Node) {
		for _, d := range x.Dependencies() {
			if seen[d] {
				continue
			}
			seen[d] = true
			if d.Block != "" {
				deps = append(deps, moduleRef(d.Block, nil))
			} else {
				walk(d)
			}
		}
	}
	walk(n)
	if len(deps) > 0 {
		attrs = append(attrs, hattr{"depends_on", hv{line: "[" + strings.Join(deps, ", ") + "]"}})
	}
	return attrs
}

var blockKeyRE = regexp.MustCompile(`^(.+)\[(\d+)\]$`)

// config renders provider configuration: a key "name[N]" whose value is a
// map becomes the N-th nested block "name"; other keys are attributes.
func (r *renderer) config(cfg map[string]any, where string) []hattr {
	type blk struct {
		name string
		idx  int
		v    map[string]any
	}
	var attrs []hattr
	var blocks []blk
	sc := &scope{allow: allowProvider}
	for _, k := range sortedKeys(cfg) {
		if m := blockKeyRE.FindStringSubmatch(k); m != nil {
			if v, ok := cfg[k].(map[string]any); ok {
				i, _ := strconv.Atoi(m[2])
				blocks = append(blocks, blk{m[1], i, v})
				continue
			}
		}
		attrs = append(attrs, hattr{k, r.value(cfg[k], sc, where+" configuration."+k)})
	}
	sort.SliceStable(blocks, func(i, j int) bool {
		if blocks[i].name != blocks[j].name {
			return blocks[i].name < blocks[j].name
		}
		return blocks[i].idx < blocks[j].idx
	})
	for _, bl := range blocks {
		attrs = append(attrs, hattr{"\x00block " + bl.name, hv{obj: r.config(bl.v, where), isObj: true}})
	}
	return attrs
}

// quote is s as an HCL string literal (escaped by hclwrite, including
// "${" and "%{").
func quote(s string) string {
	return string(hclwrite.TokensForValue(cty.StringVal(s)).Bytes())
}

func number(v cty.Value) hv { return hv{line: string(hclwrite.TokensForValue(v).Bytes())} }

// value renders a JSON-like value with placeholders as an expression.
// Objects nested in lists are written on one line.
func (r *renderer) value(v any, sc *scope, where string) hv {
	switch x := v.(type) {
	case nil:
		return hv{line: "null"}
	case string:
		return hv{line: r.str(x, sc, where)}
	case bool:
		return hv{line: strconv.FormatBool(x)}
	case float64:
		return number(cty.NumberFloatVal(x))
	case float32:
		return number(cty.NumberFloatVal(float64(x)))
	case int:
		return number(cty.NumberIntVal(int64(x)))
	case int64:
		return number(cty.NumberIntVal(x))
	case json.Number:
		if n, err := cty.ParseNumberVal(string(x)); err == nil {
			return number(n)
		}
		return hv{line: quote(string(x))}
	case []any:
		elems := make([]string, len(x))
		for i, e := range x {
			elems[i] = r.value(e, sc, fmt.Sprintf("%s[%d]", where, i)).inline()
		}
		return hv{line: "[" + strings.Join(elems, ", ") + "]"}
	case map[string]any:
		attrs := []hattr{}
		for _, k := range sortedKeys(x) {
			attrs = append(attrs, hattr{quote(k), r.value(x[k], sc, where+"."+k)})
		}
		return hv{obj: attrs, isObj: true}
	}
	r.errs = append(r.errs, fmt.Sprintf("%s: unsupported value of type %T", where, v))
	return hv{line: "null"}
}

// str renders a string: a literal, a bare placeholder (keeping its type) or
// a template.
func (r *renderer) str(s string, sc *scope, where string) string {
	t, err := r.g.template(s)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: %v", where, err))
		return quote(s)
	}
	if lit, ok := t.literal(); ok {
		return quote(lit)
	}
	if ref := t.bare(); ref != nil {
		if known, ok := r.known(ref, sc); ok {
			return quote(known)
		}
		expr, _ := r.expr(ref, sc, where)
		return expr
	}
	var b strings.Builder
	b.WriteByte('"')
	lit := func(s string) {
		if s != "" {
			q := quote(s)
			b.WriteString(q[1 : len(q)-1])
		}
	}
	for _, p := range t {
		if p.ref == nil {
			lit(p.lit)
			continue
		}
		if known, ok := r.known(p.ref, sc); ok {
			lit(known)
			continue
		}
		x, typ := r.expr(p.ref, sc, where)
		b.WriteString("${")
		switch typ {
		case "string", "number", "integer", "boolean":
			b.WriteString(x)
		case "object", "array":
			b.WriteString("jsonencode(" + x + ")")
		default:
			b.WriteString(x + ` == null ? "null" : try(tostring(` + x + `), jsonencode(` + x + `))`)
		}
		b.WriteByte('}')
	}
	b.WriteByte('"')
	return b.String()
}

// known returns the compile-time value of a context placeholder.
func (r *renderer) known(ref *ref, sc *scope) (string, bool) {
	if ref.kind != refContext {
		return "", false
	}
	c := r.g.Context
	switch ref.key {
	case "org_id":
		return c.OrgID, true
	case "project_id":
		return c.ProjectID, true
	case "env_id":
		return c.EnvID, true
	case "env_type_id":
		return c.EnvTypeID, true
	}
	if sc == nil || sc.node == nil {
		return "", true
	}
	switch ref.key {
	case "res_type":
		return sc.node.Type, true
	case "res_class":
		return sc.node.Class, true
	case "res_id":
		return sc.node.ID, true
	}
	return "", true
}

// expr returns the expression of a non-context placeholder and the JSON
// Schema type of its value ("" when unknown).
func (r *renderer) expr(ref *ref, sc *scope, where string) (string, string) {
	if ref.kind == refVar {
		r.vars[ref.key] = true
		return "var." + ref.key, "string"
	}
	if sc == nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} cannot be resolved here", where, ref.raw))
		return "null", ""
	}
	targets := r.g.targets(sc, ref)
	if ref.kind == refSelect {
		elems := make([]string, 0, len(targets))
		for _, t := range targets {
			if t.Block == "" {
				r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} selects %s, which has no module", where, ref.raw, t.Coord))
				continue
			}
			elems = append(elems, moduleRef(t.Block, ref.path))
		}
		return "[" + strings.Join(elems, ", ") + "]", "array"
	}
	if len(targets) != 1 || targets[0].Block == "" {
		r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} refers to no resource with a module", where, ref.raw))
		return "null", ""
	}
	t := targets[0]
	return moduleRef(t.Block, ref.path), t.rt.outputType(ref.path)
}

var digitsRE = regexp.MustCompile(`^[0-9]+$`)

// moduleRef is module.<block>[.<key>…]; all-digit keys become indexes and
// keys that are not identifiers become ["key"].
func moduleRef(block string, path []string) string {
	var b strings.Builder
	b.WriteString("module.")
	b.WriteString(block)
	for _, k := range path {
		switch {
		case digitsRE.MatchString(k):
			b.WriteString("[" + k + "]")
		case hclsyntax.ValidIdentifier(k):
			b.WriteString("." + k)
		default:
			b.WriteString("[" + quote(k) + "]")
		}
	}
	return b.String()
}
