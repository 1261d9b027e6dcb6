package stack

import (
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Import mode. Terraform accepts import blocks only in a root module, but
// a stack's import blocks live in its components' modules. Before a
// deployment is compiled, liftImports takes the top-level import blocks
// out of every local component module (in the run's scratch copy) and
// keeps them on the Config; Compile writes them into the generated root
// module, addressed into the component (to = module.<component>.<to>),
// when the deployment sets import = true. Otherwise they are dropped: once
// a migration is done and import = true removed, they are moot.

// ImportBlock is an import block of a component's module, lifted to the
// generated root module.
type ImportBlock struct {
	Component string
	To        string // the address inside the component's module
	ID        string // the id expression's text (no references)
	Range     hcl.Range
}

// liftImports removes the import blocks of the local component modules
// under root (rewriting their files) and returns them, per component. An
// import block whose id refers to anything, or that names a provider or
// has for_each, is a diagnostic: it cannot be moved to the root module.
func liftImports(root string, cfg *Config) ([]*ImportBlock, Diagnostics) {
	var out []*ImportBlock
	var diags hcl.Diagnostics
	sources := map[string][]byte{}
	byDir := map[string][]*ImportBlock{} // module folder → its blocks (Component unset)
	for _, c := range cfg.Components {
		if !strings.HasPrefix(c.Source, "./") && !strings.HasPrefix(c.Source, "../") {
			continue
		}
		dir := filepath.Join(root, filepath.FromSlash(c.Source))
		if rel, err := filepath.Rel(root, dir); err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		blocks, done := byDir[dir]
		if !done {
			var d hcl.Diagnostics
			blocks, d = liftDir(root, dir, sources)
			diags = append(diags, d...)
			byDir[dir] = blocks
		}
		for _, b := range blocks {
			out = append(out, &ImportBlock{Component: c.Name, To: b.To, ID: b.ID, Range: b.Range})
		}
	}
	for k, v := range cfg.Sources {
		sources[k] = v
	}
	return out, fromHCL(diags, sources)
}

// liftDir takes the import blocks out of the .tf files of one folder.
func liftDir(root, dir string, sources map[string][]byte) ([]*ImportBlock, hcl.Diagnostics) {
	names, err := filepath.Glob(filepath.Join(dir, "*.tf"))
	if err != nil {
		return nil, nil
	}
	sort.Strings(names)
	var out []*ImportBlock
	var diags hcl.Diagnostics
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil || !strings.Contains(string(src), "import") {
			continue
		}
		rel, err := filepath.Rel(root, name)
		if err != nil {
			continue
		}
		rel = filepath.ToSlash(rel)
		f, d := hclsyntax.ParseConfig(src, rel, hcl.InitialPos)
		if d.HasErrors() {
			continue // terraform reports it
		}
		sources[rel] = src
		body := f.Body.(*hclsyntax.Body)
		var cuts []hcl.Range
		for _, b := range body.Blocks {
			if b.Type != "import" {
				continue
			}
			cuts = append(cuts, b.Range())
			bad := func(detail string) {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unsupported import block", Detail: detail, Subject: b.DefRange().Ptr()})
			}
			to, hasTo := b.Body.Attributes["to"]
			id, hasID := b.Body.Attributes["id"]
			switch {
			case !hasTo || !hasID:
				bad("An import block of a component needs to and id.")
				continue
			case b.Body.Attributes["for_each"] != nil || b.Body.Attributes["provider"] != nil || b.Body.Attributes["identity"] != nil:
				bad("An import block of a component cannot use for_each, provider or identity: Terrace moves it to the deployment's root module.")
				continue
			case len(id.Expr.Variables()) > 0:
				bad("The id of a component's import block must not refer to anything (write the id itself): Terrace moves the block to the deployment's root module, where the module's variables do not exist.")
				continue
			}
			if _, d := hcl.AbsTraversalForExpr(to.Expr); d.HasErrors() {
				bad("The to argument must be a resource address.")
				continue
			}
			out = append(out, &ImportBlock{To: text(src, to.Expr.Range()), ID: text(src, id.Expr.Range()), Range: b.DefRange()})
		}
		if len(cuts) == 0 {
			continue
		}
		// Cut from the end so the earlier offsets stay valid.
		for i := len(cuts) - 1; i >= 0; i-- {
			src = append(src[:cuts[i].Start.Byte:cuts[i].Start.Byte], src[cuts[i].End.Byte:]...)
		}
		if err := os.WriteFile(name, src, 0o644); err != nil {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Cannot prepare the deployment", Detail: err.Error()})
		}
	}
	return out, diags
}

func text(src []byte, r hcl.Range) string {
	start, end := clamp(r.Start.Byte, 0, len(src)), clamp(r.End.Byte, 0, len(src))
	return string(src[start:end])
}

// imports writes the lifted import blocks, addressed into their
// components: one per component instance of an expanded component, and
// with the component's for_each (Terraform 1.7, OpenTofu 1.7) otherwise.
func (w *compiler) imports() {
	for _, im := range w.cfg.Imports {
		c := w.cfg.Component(im.Component)
		if c == nil {
			continue
		}
		if insts, ok := w.components[c.Name]; ok {
			for _, in := range insts {
				w.printf("import {\n  to = module.%s__%s.%s\n  id = %s\n}\n\n", c.Name, identFor(in.key), im.To, im.ID)
			}
			continue
		}
		if c.ForEach != nil {
			w.printf("import {\n  for_each = %s\n  to = module.%s[each.key].%s\n  id = %s\n}\n\n", w.expr(c.ForEach), c.Name, im.To, im.ID)
			continue
		}
		w.printf("import {\n  to = module.%s.%s\n  id = %s\n}\n\n", c.Name, im.To, im.ID)
	}
}
