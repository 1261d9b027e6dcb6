package repocheck

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp/syntax"
	"strconv"
	"strings"
)

// MaxRepeat is the largest count a bounded repetition in a regular
// expression of the code may have. Go compiles `x{0,254}` into 254 copies
// of x: a package-level rule with one held 100 kB or more for the life of
// the process, and one with a Unicode class 3 MB (docs/design/memory.md).
// Write `x*` with a length check instead (core.Pattern).
const MaxRepeat = 16

// BoundedRepetitions returns every regexp.MustCompile or regexp.Compile
// call with a literal expression, in the Go files (relative to root; not
// tests), whose expression has a repetition counting past MaxRepeat.
func BoundedRepetitions(root string, files []string) ([]Finding, error) {
	var out []Finding
	fset := token.NewFileSet()
	for _, name := range files {
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", name, err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "MustCompile" && sel.Sel.Name != "Compile") {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "regexp" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			expr, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if rep := largestRepeat(expr); rep != "" {
				out = append(out, Finding{File: name, Line: fset.Position(lit.Pos()).Line, Text: fmt.Sprintf("%s repeats %s", lit.Value, rep)})
			}
			return true
		})
	}
	return out, nil
}

// largestRepeat names the first repetition of expr counting past
// MaxRepeat ("" for none, or for an expression that does not parse).
func largestRepeat(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	var found string
	var walk func(*syntax.Regexp)
	walk = func(r *syntax.Regexp) {
		if found != "" {
			return
		}
		if r.Op == syntax.OpRepeat && (r.Max > MaxRepeat || r.Min > MaxRepeat) {
			found = r.String()
			return
		}
		for _, s := range r.Sub {
			walk(s)
		}
	}
	walk(re)
	return found
}
