package trigger

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"path"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// Which outputs of a producer a consumer's configuration reads. Terraform
// downloads whole states, so the state read itself does not say; the
// consumer's configuration does: every `data "terraform_remote_state"`
// pointing at the producer's workspace, and every reference
// `data.terraform_remote_state.<name>.outputs.<output>` in the same module.
// Whenever that cannot be decided statically (a workspace name that is not
// a literal, a reference to the whole outputs object, a JSON configuration,
// no matching data source at all), the answer is every output: a derived
// edge may carry too many outputs, never too few.

// readSet is the outputs read: all, or the names in names.
type readSet struct {
	all   bool
	names map[string]bool
}

func (r *readSet) add(name string) {
	if r.names == nil {
		r.names = map[string]bool{}
	}
	r.names[name] = true
}

// maxConfigFile and maxConfigTotal bound what is parsed of an archive.
const (
	maxConfigFile  = 1 << 20
	maxConfigTotal = 32 << 20
)

// outputsRead returns the outputs of workspace org/name that the
// configuration in archive (a tar.gz configuration version) reads.
func outputsRead(archive []byte, org, name string) readSet {
	all := readSet{all: true}
	files, err := tfFiles(archive)
	if err != nil {
		return all
	}
	type source struct {
		matches bool // points at org/name, or cannot be told
	}
	// Per module directory: data sources by name, and references.
	sources := map[string]map[string]source{}
	refs := map[string]map[string]*readSet{} // dir -> data source name -> outputs
	for p, src := range files {
		if strings.HasSuffix(p, ".tf.json") {
			return all
		}
		f, diags := hclsyntax.ParseConfig(src, p, hcl.InitialPos)
		if diags.HasErrors() {
			return all
		}
		dir := path.Dir(p)
		if sources[dir] == nil {
			sources[dir], refs[dir] = map[string]source{}, map[string]*readSet{}
		}
		body := f.Body.(*hclsyntax.Body)
		for _, b := range body.Blocks {
			if b.Type == "data" && len(b.Labels) == 2 && b.Labels[0] == "terraform_remote_state" {
				sources[dir][b.Labels[1]] = source{matches: pointsAt(b.Body, org, name)}
			}
		}
		walkAttrs(body, func(e hclsyntax.Expression) {
			for _, tr := range e.Variables() {
				ds, out, whole, ok := remoteStateRef(tr)
				if !ok {
					continue
				}
				rs := refs[dir][ds]
				if rs == nil {
					rs = &readSet{}
					refs[dir][ds] = rs
				}
				if whole {
					rs.all = true
				} else {
					rs.add(out)
				}
			}
		})
	}
	var got readSet
	found := false
	for dir, byName := range sources {
		for ds, s := range byName {
			if !s.matches {
				continue
			}
			found = true
			rs := refs[dir][ds]
			if rs == nil {
				continue // declared, never used
			}
			if rs.all {
				return all
			}
			for n := range rs.names {
				got.add(n)
			}
		}
	}
	if !found {
		return all
	}
	if got.names == nil {
		got.names = map[string]bool{}
	}
	return got
}

// tfFiles reads the .tf and .tf.json files of a tar.gz archive.
func tfFiles(archive []byte) (map[string][]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	out := map[string][]byte{}
	total := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		name := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if h.Typeflag != tar.TypeReg || !(strings.HasSuffix(name, ".tf") || strings.HasSuffix(name, ".tf.json")) {
			continue
		}
		if h.Size > maxConfigFile || total+int(h.Size) > maxConfigTotal {
			return nil, errors.New("configuration too large to analyse")
		}
		b, err := io.ReadAll(io.LimitReader(tr, maxConfigFile+1))
		if err != nil {
			return nil, err
		}
		total += len(b)
		out[name] = b
	}
}

// pointsAt reports whether a terraform_remote_state block may read
// org/name: its backend is remote or cloud and its config names that
// workspace, or something in it is not a literal.
func pointsAt(b *hclsyntax.Body, org, name string) bool {
	if a, ok := b.Attributes["backend"]; ok {
		v, diags := a.Expr.Value(nil)
		if !diags.HasErrors() && v.Type() == cty.String && v.IsKnown() && !v.IsNull() {
			if s := v.AsString(); s != "remote" && s != "cloud" {
				return false
			}
		}
	}
	a, ok := b.Attributes["config"]
	if !ok {
		return true
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsWhollyKnown() || v.IsNull() || !v.Type().IsObjectType() {
		return true
	}
	str := func(v cty.Value, key string) (string, bool) {
		if !v.Type().IsObjectType() || !v.Type().HasAttribute(key) {
			return "", false
		}
		x := v.GetAttr(key)
		if x.IsNull() || x.Type() != cty.String {
			return "", false
		}
		return x.AsString(), true
	}
	if o, ok := str(v, "organization"); ok && o != org {
		return false
	}
	if !v.Type().HasAttribute("workspaces") {
		return true
	}
	ws := v.GetAttr("workspaces")
	if n, ok := str(ws, "name"); ok {
		return n == name
	}
	if p, ok := str(ws, "prefix"); ok {
		return strings.HasPrefix(name, p)
	}
	return true
}

// remoteStateRef recognises data.terraform_remote_state.<ds>.outputs[.<out>].
func remoteStateRef(tr hcl.Traversal) (ds, out string, whole, ok bool) {
	if tr.RootName() != "data" || len(tr) < 3 {
		return "", "", false, false
	}
	step := func(i int) (string, bool) {
		switch s := tr[i].(type) {
		case hcl.TraverseAttr:
			return s.Name, true
		case hcl.TraverseIndex:
			if s.Key.Type() == cty.String && s.Key.IsKnown() && !s.Key.IsNull() {
				return s.Key.AsString(), true
			}
		}
		return "", false
	}
	if t, _ := step(1); t != "terraform_remote_state" {
		return "", "", false, false
	}
	ds, ok = step(2)
	if !ok {
		return "", "", false, false
	}
	if len(tr) < 4 {
		return ds, "", true, true // the whole data source
	}
	if a, _ := step(3); a != "outputs" {
		return "", "", false, false // backend, config, …
	}
	if len(tr) < 5 {
		return ds, "", true, true
	}
	if out, ok = step(4); !ok {
		return ds, "", true, true // a computed key: any output
	}
	return ds, out, false, true
}

// walkAttrs calls fn with every attribute expression of body, nested
// blocks included.
func walkAttrs(body *hclsyntax.Body, fn func(hclsyntax.Expression)) {
	for _, a := range body.Attributes {
		fn(a.Expr)
	}
	for _, b := range body.Blocks {
		walkAttrs(b.Body, fn)
	}
}
