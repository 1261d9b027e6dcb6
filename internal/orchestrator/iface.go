package orchestrator

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// ModuleInterface is what the compiler knows of a module's Terraform code:
// its variables (name → whether it has a default) and the outputs declared
// sensitive. It is read from inline code (ParseInterface); for git and
// mounted sources the caller may supply it in Catalogue.Interfaces, else
// the module's variables are unknown and Terraform checks them at plan.
type ModuleInterface struct {
	Variables        map[string]bool `json:"variables"` // name → has a default
	SensitiveOutputs []string        `json:"sensitive_outputs,omitempty"`
}

// ParseInterface reads the variables and sensitive outputs of Terraform
// code. Code that does not parse has no interface (nil): Terraform reports
// the syntax error at init.
func ParseInterface(files map[string][]byte) *ModuleInterface {
	mi := &ModuleInterface{Variables: map[string]bool{}}
	for name, src := range files {
		f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
		if diags.HasErrors() {
			return nil
		}
		body, ok := f.Body.(*hclsyntax.Body)
		if !ok {
			return nil
		}
		for _, b := range body.Blocks {
			if len(b.Labels) != 1 {
				continue
			}
			switch b.Type {
			case "variable":
				_, hasDefault := b.Body.Attributes["default"]
				mi.Variables[b.Labels[0]] = hasDefault
			case "output":
				if a, ok := b.Body.Attributes["sensitive"]; ok {
					if v, d := a.Expr.Value(nil); !d.HasErrors() && v.Type() == cty.Bool && v.IsKnown() && v.True() {
						mi.SensitiveOutputs = append(mi.SensitiveOutputs, b.Labels[0])
					}
				}
			}
		}
	}
	return mi
}

// iface returns what is known of the module's code: parsed from inline
// code, or given by the catalogue for its source; nil when unknown.
func (c *Catalogue) iface(m *Module) *ModuleInterface {
	if m.ModuleSourceCode != "" {
		return ParseInterface(map[string][]byte{"main.tf": []byte(m.ModuleSourceCode)})
	}
	if c.Interfaces != nil {
		return c.Interfaces[m.ModuleSource]
	}
	return nil
}
