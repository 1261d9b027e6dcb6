package nocode

import (
	"context"
)

// ProvisionForm returns what a provisioning form asks for: the version a
// no-code module provisions now and that version's variables, each with
// its allowed values (none: any value).
func (s *Service) ProvisionForm(ctx context.Context, id string) (*Module, string, []ModuleVariable, error) {
	n, m, err := s.provisionable(ctx, id)
	if err != nil {
		return nil, "", nil, err
	}
	pin, declared, err := s.effectivePin(ctx, n, m)
	if err != nil {
		return nil, "", nil, err
	}
	out := make([]ModuleVariable, len(declared))
	for i, v := range declared {
		out[i] = ModuleVariable{Variable: v, Options: []string{}}
		for _, o := range n.VariableOptions {
			if o.VariableName == v.Name {
				out[i].Options = o.Options
			}
		}
	}
	return n, pin, out, nil
}
