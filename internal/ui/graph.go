package ui

import (
	"sort"
	"strconv"

	"github.com/terracehq/terrace/internal/orchestrator"
)

// svgGraph is a resource graph laid out on the server: dependencies in
// columns to the left of what depends on them (longest-path layering),
// nodes ordered within a column by the mean row of their dependencies.
type svgGraph struct {
	Width, Height int
	Nodes         []svgNode
	Edges         []svgEdge
}

type svgNode struct {
	X, Y, W, H   int
	Label, Sub   string
	Class, Title string
}

type svgEdge struct {
	// D is the path's d attribute.
	D string
}

const (
	nodeW, nodeH = 190, 46
	gapX, gapY   = 70, 22
	pad          = 16
)

func layoutGraph(g orchestrator.GraphJSON) svgGraph {
	key := func(c orchestrator.Coord) string { return c.Type + "." + c.Class + "#" + c.ID }
	deps := map[string][]string{}
	for _, e := range g.Edges {
		deps[key(e.From)] = append(deps[key(e.From)], key(e.To))
	}
	layer := map[string]int{}
	var depth func(k string, seen map[string]bool) int
	depth = func(k string, seen map[string]bool) int {
		if l, ok := layer[k]; ok {
			return l
		}
		if seen[k] { // a cycle: the compiler refuses them, draw flat
			return 0
		}
		seen[k] = true
		l := 0
		for _, d := range deps[k] {
			if dl := depth(d, seen) + 1; dl > l {
				l = dl
			}
		}
		layer[k] = l
		return l
	}
	cols := map[int][]orchestrator.NodeJSON{}
	maxLayer := 0
	for _, n := range g.Nodes {
		l := depth(key(orchestrator.Coord{Type: n.Type, Class: n.Class, ID: n.ID}), map[string]bool{})
		cols[l] = append(cols[l], n)
		maxLayer = max(maxLayer, l)
	}
	row := map[string]float64{}
	pos := map[string][2]int{}
	out := svgGraph{}
	rows := 0
	for l := 0; l <= maxLayer; l++ {
		col := cols[l]
		mean := func(n orchestrator.NodeJSON) float64 {
			ds := deps[key(orchestrator.Coord{Type: n.Type, Class: n.Class, ID: n.ID})]
			if len(ds) == 0 {
				return 0
			}
			s := 0.0
			for _, d := range ds {
				s += row[d]
			}
			return s / float64(len(ds))
		}
		sort.SliceStable(col, func(i, j int) bool { return mean(col[i]) < mean(col[j]) })
		for i, n := range col {
			k := key(orchestrator.Coord{Type: n.Type, Class: n.Class, ID: n.ID})
			row[k] = float64(i)
			x, y := pad+l*(nodeW+gapX), pad+i*(nodeH+gapY)
			pos[k] = [2]int{x, y}
			label := n.ID
			if n.Type == "workload" {
				label = "workload " + n.ID
			}
			sub := n.Type
			if n.Class != "" && n.Class != "default" {
				sub += " · " + n.Class
			}
			if n.Module != "" {
				sub += " · " + n.Module
			}
			cls := "res"
			if n.Type == "workload" {
				cls = "wl"
			} else if n.Module == "" {
				cls = "none"
			}
			out.Nodes = append(out.Nodes, svgNode{X: x, Y: y, W: nodeW, H: nodeH, Label: clip(label, 26), Sub: clip(sub, 32), Class: cls, Title: k})
		}
		rows = max(rows, len(col))
	}
	for _, e := range g.Edges {
		from, ok1 := pos[key(e.From)]
		to, ok2 := pos[key(e.To)]
		if !ok1 || !ok2 {
			continue
		}
		// From the dependency's right side to the dependent's left side.
		x1, y1 := to[0]+nodeW, to[1]+nodeH/2
		x2, y2 := from[0], from[1]+nodeH/2
		mid := (x1 + x2) / 2
		out.Edges = append(out.Edges, svgEdge{D: pathD(x1, y1, mid, x2, y2)})
	}
	out.Width = 2*pad + (maxLayer+1)*nodeW + maxLayer*gapX
	out.Height = 2*pad + rows*nodeH + max(rows-1, 0)*gapY
	return out
}

func pathD(x1, y1, mid, x2, y2 int) string {
	return "M" + itoa(x1) + "," + itoa(y1) + " C" + itoa(mid) + "," + itoa(y1) + " " + itoa(mid) + "," + itoa(y2) + " " + itoa(x2-6) + "," + itoa(y2)
}

func itoa(i int) string { return strconv.Itoa(i) }

func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
