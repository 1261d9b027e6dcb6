package registry

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/terraform-config-inspect/tfconfig"

	"github.com/terracehq/terrace/internal/core"
)

// inspect reads the root module unpacked in dir. Configuration that does
// not parse is core.KindInvalid with terraform's diagnostics.
func inspect(dir string) (*Inspection, error) {
	mod, diags := tfconfig.LoadModule(dir)
	if diags.HasErrors() {
		return nil, core.Invalid("module configuration is invalid: %s", strings.ReplaceAll(diags.Err().Error(), dir+"/", ""))
	}
	out := &Inspection{Variables: []Variable{}, Outputs: []Output{}, Providers: []ProviderDependency{}, Resources: []Resource{}}

	vars := make([]*tfconfig.Variable, 0, len(mod.Variables))
	for _, v := range mod.Variables {
		vars = append(vars, v)
	}
	sort.Slice(vars, func(i, j int) bool { return posLess(vars[i].Pos, vars[j].Pos, vars[i].Name, vars[j].Name) })
	for _, v := range vars {
		typ := v.Type
		if typ == "" {
			typ = "any"
		}
		iv := Variable{Name: v.Name, Type: typ, Description: v.Description, Required: v.Required, Sensitive: v.Sensitive}
		if !v.Required {
			b, err := json.Marshal(v.Default)
			if err != nil {
				b = []byte("null")
			}
			iv.Default = b
		}
		out.Variables = append(out.Variables, iv)
	}

	outs := make([]*tfconfig.Output, 0, len(mod.Outputs))
	for _, o := range mod.Outputs {
		outs = append(outs, o)
	}
	sort.Slice(outs, func(i, j int) bool { return posLess(outs[i].Pos, outs[j].Pos, outs[i].Name, outs[j].Name) })
	for _, o := range outs {
		out.Outputs = append(out.Outputs, Output{Name: o.Name, Description: o.Description, Sensitive: o.Sensitive})
	}

	names := make([]string, 0, len(mod.RequiredProviders))
	for n := range mod.RequiredProviders {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		req := mod.RequiredProviders[n]
		src := req.Source
		if src == "" {
			if n == "terraform" {
				continue // the built-in provider (terraform_data)
			}
			src = "hashicorp/" + n
		}
		ns := ""
		if parts := strings.Split(src, "/"); len(parts) >= 2 {
			ns = parts[len(parts)-2]
		}
		out.Providers = append(out.Providers, ProviderDependency{Name: n, Namespace: ns, Source: src, Version: strings.Join(req.VersionConstraints, ", ")})
	}

	res := make([]*tfconfig.Resource, 0, len(mod.ManagedResources))
	for _, r := range mod.ManagedResources {
		res = append(res, r)
	}
	sort.Slice(res, func(i, j int) bool { return posLess(res[i].Pos, res[j].Pos, res[i].MapKey(), res[j].MapKey()) })
	for _, r := range res {
		out.Resources = append(out.Resources, Resource{Name: r.Name, Type: r.Type})
	}
	out.Empty = len(out.Variables) == 0 && len(out.Outputs) == 0 && len(out.Resources) == 0 &&
		len(mod.DataResources) == 0 && len(mod.ModuleCalls) == 0
	readme, err := readReadme(dir)
	if err != nil {
		return nil, err
	}
	out.Readme = readme
	return out, nil
}

// readmeNames are the root module's README files in the order they are
// preferred, as the registries show them; matched without regard to case.
var readmeNames = []string{"readme.md", "readme.markdown", "readme"}

// readmeCut ends a README cut at MaxReadme.
const readmeCut = "\n\n*(The README is longer than this registry keeps: cut here.)*\n"

// readReadme reads the README at the root of the module unpacked in dir: a
// regular file only (the archive is untrusted: a link is not followed),
// at most MaxReadme bytes, as valid UTF-8.
func readReadme(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("reading the module's files: %w", err)
	}
	for _, want := range readmeNames {
		for _, e := range entries {
			if !strings.EqualFold(e.Name(), want) || !e.Type().IsRegular() {
				continue
			}
			f, err := os.Open(filepath.Join(dir, e.Name()))
			if err != nil {
				return "", fmt.Errorf("reading the module's README: %w", err)
			}
			b, err := io.ReadAll(io.LimitReader(f, MaxReadme+1))
			f.Close()
			if err != nil {
				return "", fmt.Errorf("reading the module's README: %w", err)
			}
			return readmeText(b), nil
		}
	}
	return "", nil
}

// readmeText is a README read (up to MaxReadme+1 bytes) as kept: valid
// UTF-8, and longer than MaxReadme cut at a character with readmeCut.
func readmeText(b []byte) string {
	if len(b) <= MaxReadme {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	b = b[:MaxReadme-len(readmeCut)]
	// Not a character cut in two: drop the last one's first bytes.
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD") + readmeCut
}

// posLess orders declarations as written: by file, then line.
func posLess(a, b tfconfig.SourcePos, an, bn string) bool {
	if a.Filename != b.Filename {
		return a.Filename < b.Filename
	}
	if a.Line != b.Line {
		return a.Line < b.Line
	}
	return an < bn
}
