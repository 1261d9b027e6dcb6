package orchestrator

import "sort"

// MetadataOutputs are the module output names that carry a node's metadata
// for display rather than data for other resources: the seed's
// humanitec_metadata and the new generation's platform_orchestrator_metadata.
var MetadataOutputs = []string{"humanitec_metadata", "platform_orchestrator_metadata"}

// Sensitivity lists the outputs to hide by default: per resource node
// (keyed "<type>.<class>#<id>", as in the "resources" root output) the
// module outputs declared sensitive, and per workload the outputs that
// refer to any of them.
type Sensitivity struct {
	Resources map[string][]string `json:"resources,omitempty"`
	Workloads map[string][]string `json:"workloads,omitempty"`
}

// Sensitive returns the graph's sensitive outputs. Modules whose code the
// compiler cannot read (and no Catalogue.Interfaces entry describes) have
// none known.
func (g *Graph) Sensitive(cat *Catalogue) Sensitivity {
	s := Sensitivity{Resources: map[string][]string{}, Workloads: map[string][]string{}}
	secret := map[*Node]map[string]bool{}
	for _, n := range g.Nodes {
		if n.Module == nil {
			continue
		}
		mi := cat.iface(n.Module)
		if mi == nil || len(mi.SensitiveOutputs) == 0 {
			continue
		}
		secret[n] = map[string]bool{}
		for _, o := range mi.SensitiveOutputs {
			secret[n][o] = true
		}
		outs := append([]string(nil), mi.SensitiveOutputs...)
		sort.Strings(outs)
		s.Resources[n.Coord.String()] = outs
	}
	for _, name := range sortedKeys(g.Workloads) {
		n := g.Workloads[name]
		for _, k := range sortedKeys(n.Outputs) {
			str, ok := n.Outputs[k].(string)
			if !ok {
				continue
			}
			t, err := g.template(str)
			if err != nil {
				continue
			}
			hidden := false
			for _, r := range t.refs() {
				for _, target := range g.targets(n.paramsScope, r) {
					if len(r.path) > 0 && secret[target][r.path[0]] {
						hidden = true
					}
				}
			}
			if hidden {
				s.Workloads[name] = append(s.Workloads[name], k)
			}
		}
	}
	return s
}
