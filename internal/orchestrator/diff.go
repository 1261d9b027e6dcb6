package orchestrator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
)

// NodeState is what a deployment stores about a node so the next deployment
// can diff against it (the graph JSON of the CLI omits params and module
// versions on purpose: its shape is fixed).
type NodeState struct {
	Coord
	Module        string         `json:"module"`
	ModuleVersion string         `json:"module_version,omitempty"`
	Params        map[string]any `json:"params,omitempty"`
}

// State returns the nodes to store with a deployment, sorted by coordinate.
func (g *Graph) State() []NodeState {
	out := make([]NodeState, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		s := NodeState{Coord: n.Coord, Params: n.Params}
		if n.Module != nil {
			s.Module, s.ModuleVersion = n.Module.ID, n.Module.VersionID
		}
		out = append(out, s)
	}
	return out
}

// Change is one difference between two deployments' graphs.
type Change struct {
	Resource Coord  `json:"resource"`
	Type     string `json:"type"` // added, removed, module_changed, params_changed
	Summary  string `json:"summary"`
}

// Change types.
const (
	ChangeAdded         = "added"
	ChangeRemoved       = "removed"
	ChangeModuleChanged = "module_changed"
	ChangeParamsChanged = "params_changed"
)

// Diff compares the stored state of the last deployment with the next one,
// sorted by coordinate. A node whose module (or module version) changed is
// module_changed even if its params changed too.
func Diff(prev, next []NodeState) []Change {
	old := make(map[Coord]NodeState, len(prev))
	for _, s := range prev {
		old[s.Coord] = s
	}
	var out []Change
	for _, s := range next {
		o, ok := old[s.Coord]
		delete(old, s.Coord)
		switch {
		case !ok:
			out = append(out, Change{s.Coord, ChangeAdded, fmt.Sprintf("%s is added (module %s)", s.Coord, orNone(s.Module))})
		case o.Module != s.Module || o.ModuleVersion != s.ModuleVersion:
			out = append(out, Change{s.Coord, ChangeModuleChanged, fmt.Sprintf("%s: module %s%s → %s%s", s.Coord, orNone(o.Module), ver(o.ModuleVersion), orNone(s.Module), ver(s.ModuleVersion))})
		case !sameJSON(o.Params, s.Params):
			out = append(out, Change{s.Coord, ChangeParamsChanged, fmt.Sprintf("%s: params changed", s.Coord)})
		}
	}
	for _, o := range old {
		out = append(out, Change{o.Coord, ChangeRemoved, fmt.Sprintf("%s is removed", o.Coord)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Resource.Less(out[j].Resource) })
	return out
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func ver(v string) string {
	if v == "" {
		return ""
	}
	return "@" + v
}

// sameJSON compares params by their JSON form, so float64 and json.Number
// (stored and freshly decoded values) compare equal.
func sameJSON(a, b map[string]any) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}
