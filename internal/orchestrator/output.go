package orchestrator

import (
	"fmt"
	"strings"
)

// GraphJSON is the wire form of a graph (terrace graph -o json):
// {"nodes":[{"type","class","id","module"}],"edges":[{"from":{…},"to":{…}}]}
// where an edge from A to B means A depends on B.
type GraphJSON struct {
	Nodes []NodeJSON `json:"nodes"`
	Edges []EdgeJSON `json:"edges"`
}

// NodeJSON is a node; Module is the selected module's id ("" when none).
type NodeJSON struct {
	Type   string `json:"type"`
	Class  string `json:"class"`
	ID     string `json:"id"`
	Module string `json:"module"`
}

// EdgeJSON is a dependency edge: From depends on To.
type EdgeJSON struct {
	From Coord `json:"from"`
	To   Coord `json:"to"`
}

// JSON returns the graph's wire form, nodes and edges sorted by coordinate.
func (g *Graph) JSON() GraphJSON {
	out := GraphJSON{Nodes: make([]NodeJSON, 0, len(g.Nodes)), Edges: []EdgeJSON{}}
	for _, n := range g.Nodes {
		nj := NodeJSON{Type: n.Type, Class: n.Class, ID: n.ID}
		if n.Module != nil {
			nj.Module = n.Module.ID
		}
		out.Nodes = append(out.Nodes, nj)
	}
	for _, e := range g.Edges() {
		out.Edges = append(out.Edges, EdgeJSON{From: e.From.Coord, To: e.To.Coord})
	}
	return out
}

// Mermaid renders the graph as a Mermaid flowchart in the seed's style:
// an arrow A --> B means A depends on B; dependency aliases label arrows.
func (g *Graph) Mermaid() string {
	var b strings.Builder
	b.WriteString("flowchart LR\n")
	ids := make(map[*Node]string, len(g.Nodes))
	for i, n := range g.Nodes {
		ids[n] = fmt.Sprintf("n%d", i)
		label := n.Coord.String()
		if n.Module != nil {
			label += "<br/>module: " + n.Module.ID
		}
		fmt.Fprintf(&b, "  %s(\"%s\")\n", ids[n], strings.ReplaceAll(label, `"`, "#quot;"))
	}
	for _, e := range g.Edges() {
		if e.Alias != "" {
			fmt.Fprintf(&b, "  %s -->|%s| %s\n", ids[e.From], e.Alias, ids[e.To])
		} else {
			fmt.Fprintf(&b, "  %s --> %s\n", ids[e.From], ids[e.To])
		}
	}
	return b.String()
}
