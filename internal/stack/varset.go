package stack

import (
	"context"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/terracehq/terrace/internal/core"
)

// VarsetVariable is a variable of a variable set, as a store block reads
// it.
type VarsetVariable struct {
	Key, Value, Category string
	HCL, Sensitive       bool
}

// Marks of the values a store block reads: a value read as
// store.varset.<n>.<var> is ephemeral (kept neither in a saved plan nor in
// state, as HCP Terraform has it), one read as .stable.<var> is not; a
// sensitive variable's value is sensitive either way. Compile requires the
// variable an input goes to to be declared likewise.
const (
	markEphemeral = "ephemeral"
	markSensitive = "sensitive"
)

// storeValues resolves a configuration's store "varset" blocks to the
// variables of the sets they name, of their category: an object per store
// with an attribute per variable, and the same values under "stable"
// without the ephemeral mark. A set must be in the organization, and
// global or applied to the stack's project.
func (s *Service) storeValues(ctx context.Context, org, projectID string, cfg *Config) (map[string]cty.Value, Diagnostics) {
	out := map[string]cty.Value{}
	var diags Diagnostics
	for _, st := range cfg.Stores {
		fail := func(detail string) {
			diags = append(diags, fromHCL(hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "Variable set not available",
				Detail: detail, Subject: st.DeclRange.Ptr()}}, cfg.Sources)...)
		}
		vars, err := s.exec.Varset(ctx, org, projectID, st.ID, st.VarsetName)
		if kind := core.KindOf(err); kind == core.KindNotFound || kind == core.KindInvalid {
			fail(fmt.Sprintf("The store %q: %v.", st.Name, err))
			continue
		}
		if err != nil {
			return nil, Diagnostics{{Severity: SeverityError, Summary: "Cannot read variable sets", Detail: err.Error()}}
		}
		values, stable := map[string]cty.Value{}, map[string]cty.Value{}
		for _, v := range vars {
			if v.Category != st.Category {
				continue
			}
			val := cty.StringVal(v.Value)
			if v.HCL {
				expr, d := hclsyntax.ParseExpression([]byte(v.Value), v.Key, hcl.InitialPos)
				if !d.HasErrors() {
					val, d = expr.Value(nil)
				}
				if d.HasErrors() {
					// Not the value: it may be a secret.
					fail(fmt.Sprintf("The store %q: the HCL value of variable %q does not evaluate to a constant.", st.Name, v.Key))
					continue
				}
			}
			if v.Sensitive {
				val = val.Mark(markSensitive)
			}
			stable[v.Key] = val
			values[v.Key] = val.Mark(markEphemeral)
		}
		if _, clash := values["stable"]; !clash {
			values["stable"] = cty.ObjectVal(stable)
		}
		out[st.Name] = cty.ObjectVal(values)
	}
	return out, diags
}
