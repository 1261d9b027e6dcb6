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

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/zclconf/go-cty/cty"
)

// hclwrite (github.com/hashicorp/hcl/v2) builds the configuration as
// tokens, so every string is escaped correctly (including "${" and "%{" in
// literals) and the output is canonically formatted, which plain string
// templates would not guarantee.

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
	// Each top-level block is built and formatted as its own small file
	// and the results are concatenated: formatting one huge token list
	// and hclwrite's Body.Blocks scans made a 10,000-node graph take
	// seconds; blocks are separated by blank lines, so no alignment spans
	// two of them and the output is the same.
	var out bytes.Buffer
	block := func(typ string, labels ...string) *hclwrite.Body {
		return r.open(&out).AppendNewBlock(typ, labels).Body()
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
	refs := sortedKeys(used)
	if len(refs) > 0 {
		tf := block("terraform")
		rp := tf.AppendNewBlock("required_providers", nil).Body()
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
		for _, ref := range refs {
			p := used[ref]
			pb := block("provider", p.ProviderType)
			pb.SetAttributeValue("alias", cty.StringVal(p.ID))
			r.configBody(pb, p.Configuration, "provider "+ref)
		}
	}

	for _, n := range g.Nodes {
		if n.Module == nil {
			continue
		}
		r.module(block("module", n.Block), n)
	}

	// outputs
	if len(g.Workloads) > 0 {
		var wl []hclwrite.ObjectAttrTokens
		for _, name := range sortedKeys(g.Workloads) {
			w := g.Workloads[name]
			var outs []hclwrite.ObjectAttrTokens
			for _, k := range sortedKeys(w.Outputs) {
				outs = append(outs, hclwrite.ObjectAttrTokens{
					Name:  hclwrite.TokensForValue(cty.StringVal(k)),
					Value: r.value(w.Outputs[k], w.paramsScope, w.Coord.String()+" outputs."+k),
				})
			}
			wl = append(wl, hclwrite.ObjectAttrTokens{Name: hclwrite.TokensForValue(cty.StringVal(name)), Value: hclwrite.TokensForObject(outs)})
		}
		ob := block("output", "workloads")
		ob.SetAttributeRaw("value", hclwrite.TokensForObject(wl))
		ob.SetAttributeValue("sensitive", cty.True)
	}
	var res []hclwrite.ObjectAttrTokens
	for _, n := range g.Nodes {
		if n.Module == nil {
			continue
		}
		res = append(res, hclwrite.ObjectAttrTokens{
			Name:  hclwrite.TokensForValue(cty.StringVal(n.Coord.String())),
			Value: moduleRef(n.Block, nil),
		})
	}
	ob := block("output", "resources")
	ob.SetAttributeRaw("value", hclwrite.TokensForObject(res))
	ob.SetAttributeValue("sensitive", cty.True)

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
	r.open(&out) // flush the last block
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

type renderer struct {
	g    *Graph
	vars map[string]bool
	errs []string
	cur  *hclwrite.File
}

// open writes the block being built (if any) to out and starts a new one.
func (r *renderer) open(out *bytes.Buffer) *hclwrite.Body {
	if r.cur != nil {
		if out.Len() > 0 {
			out.WriteByte('\n')
		}
		out.Write(r.cur.Bytes())
	}
	r.cur = hclwrite.NewEmptyFile()
	return r.cur.Body()
}

func (r *renderer) module(b *hclwrite.Body, n *Node) {
	m := n.Module
	switch {
	case m.ModuleSourceCode != "":
		b.SetAttributeValue("source", cty.StringVal("./"+inlineDir(m)))
	case !strings.HasPrefix(m.ModuleSource, "git::") && !strings.HasPrefix(m.ModuleSource, "/") && strings.Contains(m.ModuleSource, "@"):
		src, ver, _ := strings.Cut(m.ModuleSource, "@")
		b.SetAttributeValue("source", cty.StringVal(src))
		b.SetAttributeValue("version", cty.StringVal(ver))
	default:
		b.SetAttributeValue("source", cty.StringVal(m.ModuleSource))
	}
	if len(m.ProviderMapping) > 0 {
		var attrs []hclwrite.ObjectAttrTokens
		for _, local := range sortedKeys(m.ProviderMapping) {
			typ, id, _ := strings.Cut(m.ProviderMapping[local], ".")
			attrs = append(attrs, hclwrite.ObjectAttrTokens{
				Name:  hclwrite.TokensForIdentifier(local),
				Value: hclwrite.TokensForTraversal(hcl.Traversal{hcl.TraverseRoot{Name: typ}, hcl.TraverseAttr{Name: id}}),
			})
		}
		b.SetAttributeRaw("providers", hclwrite.TokensForObject(attrs))
	}
	inScope := &scope{node: n, aliases: n.aliases, allow: allowModule.withAliases(m.Dependencies)}
	for _, k := range sortedKeys(m.ModuleInputs) {
		b.SetAttributeRaw(k, r.value(m.ModuleInputs[k], inScope, n.Coord.String()+" module_inputs."+k))
	}
	for _, k := range sortedKeys(n.Params) {
		if _, ok := m.ModuleInputs[k]; ok {
			continue
		}
		b.SetAttributeRaw(k, r.value(n.Params[k], n.paramsScope, n.Coord.String()+" params."+k))
	}
	var deps []hclwrite.Tokens
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
		b.SetAttributeRaw("depends_on", hclwrite.TokensForTuple(deps))
	}
}

var blockKeyRE = regexp.MustCompile(`^(.+)\[(\d+)\]$`)

// configBody writes provider configuration: a key "name[N]" whose value is
// a map becomes the N-th nested block "name"; other keys are attributes.
func (r *renderer) configBody(b *hclwrite.Body, cfg map[string]any, where string) {
	type blk struct {
		name string
		idx  int
		v    map[string]any
	}
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
		b.SetAttributeRaw(k, r.value(cfg[k], sc, where+" configuration."+k))
	}
	sort.SliceStable(blocks, func(i, j int) bool {
		if blocks[i].name != blocks[j].name {
			return blocks[i].name < blocks[j].name
		}
		return blocks[i].idx < blocks[j].idx
	})
	for _, bl := range blocks {
		r.configBody(b.AppendNewBlock(bl.name, nil).Body(), bl.v, where)
	}
}

// value renders a JSON-like value with placeholders as an expression.
func (r *renderer) value(v any, sc *scope, where string) hclwrite.Tokens {
	switch x := v.(type) {
	case nil:
		return hclwrite.TokensForValue(cty.NullVal(cty.DynamicPseudoType))
	case string:
		return r.str(x, sc, where)
	case bool:
		return hclwrite.TokensForValue(cty.BoolVal(x))
	case float64:
		return hclwrite.TokensForValue(cty.NumberFloatVal(x))
	case float32:
		return hclwrite.TokensForValue(cty.NumberFloatVal(float64(x)))
	case int:
		return hclwrite.TokensForValue(cty.NumberIntVal(int64(x)))
	case int64:
		return hclwrite.TokensForValue(cty.NumberIntVal(x))
	case json.Number:
		if n, err := cty.ParseNumberVal(string(x)); err == nil {
			return hclwrite.TokensForValue(n)
		}
		return hclwrite.TokensForValue(cty.StringVal(string(x)))
	case []any:
		elems := make([]hclwrite.Tokens, len(x))
		for i, e := range x {
			elems[i] = r.value(e, sc, fmt.Sprintf("%s[%d]", where, i))
		}
		return hclwrite.TokensForTuple(elems)
	case map[string]any:
		var attrs []hclwrite.ObjectAttrTokens
		for _, k := range sortedKeys(x) {
			attrs = append(attrs, hclwrite.ObjectAttrTokens{
				Name:  hclwrite.TokensForValue(cty.StringVal(k)),
				Value: r.value(x[k], sc, where+"."+k),
			})
		}
		return hclwrite.TokensForObject(attrs)
	}
	r.errs = append(r.errs, fmt.Sprintf("%s: unsupported value of type %T", where, v))
	return hclwrite.TokensForValue(cty.NullVal(cty.DynamicPseudoType))
}

// str renders a string: a literal, a bare placeholder (keeping its type) or
// a template.
func (r *renderer) str(s string, sc *scope, where string) hclwrite.Tokens {
	t, err := r.g.template(s)
	if err != nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: %v", where, err))
		return hclwrite.TokensForValue(cty.StringVal(s))
	}
	if lit, ok := t.literal(); ok {
		return hclwrite.TokensForValue(cty.StringVal(lit))
	}
	if ref := t.bare(); ref != nil {
		if known, ok := r.known(ref, sc); ok {
			return hclwrite.TokensForValue(cty.StringVal(known))
		}
		expr, _ := r.expr(ref, sc, where)
		return expr
	}
	toks := hclwrite.Tokens{{Type: hclsyntax.TokenOQuote, Bytes: []byte(`"`)}}
	lit := func(s string) {
		if s == "" {
			return
		}
		q := hclwrite.TokensForValue(cty.StringVal(s))
		toks = append(toks, q[1:len(q)-1]...)
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
		expr, typ := r.expr(p.ref, sc, where)
		var inner hclwrite.Tokens
		switch typ {
		case "string", "number", "integer", "boolean":
			inner = expr
		case "object", "array":
			inner = hclwrite.TokensForFunctionCall("jsonencode", expr)
		default:
			inner = append(inner, expr...)
			inner = append(inner,
				&hclwrite.Token{Type: hclsyntax.TokenEqualOp, Bytes: []byte("==")},
				&hclwrite.Token{Type: hclsyntax.TokenIdent, Bytes: []byte("null")},
				&hclwrite.Token{Type: hclsyntax.TokenQuestion, Bytes: []byte("?")})
			inner = append(inner, hclwrite.TokensForValue(cty.StringVal("null"))...)
			inner = append(inner, &hclwrite.Token{Type: hclsyntax.TokenColon, Bytes: []byte(":")})
			// three copies: hclwrite tokens are pointers and formatting
			// adjusts each token's spacing in place
			e2, _ := r.expr(p.ref, sc, where)
			e3, _ := r.expr(p.ref, sc, where)
			inner = append(inner, hclwrite.TokensForFunctionCall("try",
				hclwrite.TokensForFunctionCall("tostring", e2),
				hclwrite.TokensForFunctionCall("jsonencode", e3))...)
		}
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenTemplateInterp, Bytes: []byte("${")})
		toks = append(toks, inner...)
		toks = append(toks, &hclwrite.Token{Type: hclsyntax.TokenTemplateSeqEnd, Bytes: []byte("}")})
	}
	return append(toks, &hclwrite.Token{Type: hclsyntax.TokenCQuote, Bytes: []byte(`"`)})
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
func (r *renderer) expr(ref *ref, sc *scope, where string) (hclwrite.Tokens, string) {
	if ref.kind == refVar {
		r.vars[ref.key] = true
		return hclwrite.TokensForTraversal(hcl.Traversal{hcl.TraverseRoot{Name: "var"}, hcl.TraverseAttr{Name: ref.key}}), "string"
	}
	if sc == nil {
		r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} cannot be resolved here", where, ref.raw))
		return hclwrite.TokensForValue(cty.NullVal(cty.DynamicPseudoType)), ""
	}
	targets := r.g.targets(sc, ref)
	if ref.kind == refSelect {
		elems := make([]hclwrite.Tokens, 0, len(targets))
		for _, t := range targets {
			if t.Block == "" {
				r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} selects %s, which has no module", where, ref.raw, t.Coord))
				continue
			}
			elems = append(elems, moduleRef(t.Block, ref.path))
		}
		return hclwrite.TokensForTuple(elems), "array"
	}
	if len(targets) != 1 || targets[0].Block == "" {
		r.errs = append(r.errs, fmt.Sprintf("%s: ${%s} refers to no resource with a module", where, ref.raw))
		return hclwrite.TokensForValue(cty.NullVal(cty.DynamicPseudoType)), ""
	}
	t := targets[0]
	return moduleRef(t.Block, ref.path), t.rt.outputType(ref.path)
}

var digitsRE = regexp.MustCompile(`^[0-9]+$`)

// moduleRef is module.<block>[.<key>…]; all-digit keys become indexes and
// keys that are not identifiers become ["key"].
func moduleRef(block string, path []string) hclwrite.Tokens {
	tr := hcl.Traversal{hcl.TraverseRoot{Name: "module"}, hcl.TraverseAttr{Name: block}}
	for _, k := range path {
		switch {
		case digitsRE.MatchString(k):
			i, _ := strconv.ParseInt(k, 10, 64)
			tr = append(tr, hcl.TraverseIndex{Key: cty.NumberIntVal(i)})
		case hclsyntax.ValidIdentifier(k):
			tr = append(tr, hcl.TraverseAttr{Name: k})
		default:
			tr = append(tr, hcl.TraverseIndex{Key: cty.StringVal(k)})
		}
	}
	return hclwrite.TokensForTraversal(tr)
}
