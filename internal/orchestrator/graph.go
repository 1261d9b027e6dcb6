package orchestrator

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/terracehq/terrace/internal/core"
)

// Coord identifies a resource: type, class and id together name exactly one
// node of the graph.
type Coord struct {
	Type  string `json:"type"`
	Class string `json:"class"`
	ID    string `json:"id"`
}

// String is the coordinate in select-filter form: type.class#id.
func (c Coord) String() string { return c.Type + "." + c.Class + "#" + c.ID }

// Less orders coordinates by type, class, then id.
func (c Coord) Less(o Coord) bool {
	if c.Type != o.Type {
		return c.Type < o.Type
	}
	if c.Class != o.Class {
		return c.Class < o.Class
	}
	return c.ID < o.ID
}

// Context is where a manifest is deployed; it feeds ${context.…} and the
// module rules.
type Context struct {
	OrgID     string `json:"org_id"`
	ProjectID string `json:"project_id"`
	EnvID     string `json:"env_id"`
	EnvTypeID string `json:"env_type_id"`
}

// Catalogue is the configuration a compile reads: normally every resource
// type, module, module rule and provider of the organization.
type Catalogue struct {
	ResourceTypes []*ResourceType `json:"resource_types"`
	Modules       []*Module       `json:"modules"`
	Rules         []*ModuleRule   `json:"module_rules"`
	Providers     []*Provider     `json:"providers"`
	// Interfaces are the variables and sensitive outputs of module
	// sources the compiler cannot read itself (git, mounted paths), keyed
	// by module_source; inline code is parsed. Optional.
	Interfaces map[string]*ModuleInterface `json:"interfaces,omitempty"`
}

// Node is one resource of the graph.
type Node struct {
	Coord
	// Module provisions the node; nil for an unmatched node and for a
	// workload no module rule matches (such a workload only carries
	// outputs).
	Module *Module
	// Rule is the module rule that selected Module.
	Rule *ModuleRule
	// Params are the resource params, from whoever requested the node
	// first.
	Params map[string]any
	// Workload is the workload name of a workload node.
	Workload string
	// Outputs are a workload node's outputs (placeholders unresolved).
	Outputs map[string]any
	// Block is the name of the node's Terraform module block.
	Block string

	paramsScope *scope
	deps        map[*Node]string // edges to dependencies, labelled with the alias ("" when anonymous)
	consumers   map[*Node]bool   // reverse edges
	aliases     map[string]*Node // the module's dependencies by alias
	rt          *ResourceType
}

// Dependencies returns the nodes n depends on, sorted by coordinate.
func (n *Node) Dependencies() []*Node { return sortedNodes(n.deps) }

// Edge is a dependency: From depends on To. Alias is the dependency alias
// (module dependencies and workload resources), "" for edges from
// placeholders and coprovisioning.
type Edge struct {
	From, To *Node
	Alias    string
}

// Graph is a compiled resource graph.
type Graph struct {
	Context Context
	// Nodes sorted by coordinate.
	Nodes []*Node
	// Workloads are the workload nodes by name.
	Workloads map[string]*Node

	byCoord   map[Coord]*Node
	providers map[string]*Provider
	keep      []string
	tpl       map[string]template
	selects   map[selectKey][]*Node
}

type selectKey struct {
	from *Node
	raw  string
}

// KeepProviders makes Terraform render the providers refs ("<type>.<id>")
// even when no node of the graph uses them: a deployment passes the
// providers of the previous deployment so that Terraform can still destroy
// the resources of removed nodes. Refs the catalogue lacks are ignored.
func (g *Graph) KeepProviders(refs []string) { g.keep = append(g.keep, refs...) }

// ProviderRefs returns the "<type>.<id>" refs the graph's modules use, sorted.
func (g *Graph) ProviderRefs() []string {
	set := map[string]bool{}
	for _, n := range g.Nodes {
		if n.Module != nil {
			for _, ref := range n.Module.ProviderMapping {
				set[ref] = true
			}
		}
	}
	return sortedKeys(set)
}

// Node returns the node at c, or nil.
func (g *Graph) Node(c Coord) *Node { return g.byCoord[c] }

// Edges returns every edge, sorted by From then To.
func (g *Graph) Edges() []Edge {
	var out []Edge
	for _, n := range g.Nodes {
		for _, d := range n.Dependencies() {
			out = append(out, Edge{From: n, To: d, Alias: n.deps[d]})
		}
	}
	return out
}

// NodeError is one problem of one node. Code is one of the Err* constants.
type NodeError struct {
	Node   Coord  `json:"node"`
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// Node error codes.
const (
	ErrUnknownType     = "unknown_type"
	ErrNotAccessible   = "not_developer_accessible"
	ErrNoRuleMatch     = "no_rule_match"
	ErrParamsMismatch  = "params_mismatch"
	ErrParam           = "param_invalid"
	ErrMissingVariable = "variable_missing"
	ErrCycle           = "cycle"
	ErrPlaceholder     = "placeholder_invalid"
	ErrProvider        = "provider_missing"
	ErrInvalidResource = "invalid_resource"
)

// CompileError lists every node error of a compile at once.
type CompileError struct {
	Errors []NodeError `json:"errors"`
}

func (e *CompileError) Error() string {
	msgs := make([]string, len(e.Errors))
	for i, ne := range e.Errors {
		msgs[i] = ne.Node.String() + ": " + ne.Detail
	}
	return "resource graph has " + plural(len(e.Errors), "error") + ": " + strings.Join(msgs, "; ")
}

// Unwrap makes core.KindOf(err) report KindInvalid (the deploy answers 4xx).
func (e *CompileError) Unwrap() error {
	return &core.Error{Kind: core.KindInvalid, Detail: e.Error()}
}

func plural(n int, s string) string {
	if n == 1 {
		return "1 " + s
	}
	return fmt.Sprintf("%d %ss", n, s)
}

// scope resolves placeholders: context res_* and self refer to node,
// resources.<alias> to aliases, shared.<alias> to shared.
type scope struct {
	node    *Node
	aliases map[string]*Node
	shared  map[string]*Node
	allow   allowed
}

type compiler struct {
	g        *Graph
	cat      *Catalogue
	types    map[string]*ResourceType
	modules  map[string]*Module
	rules    map[ruleKey]*ModuleRule
	queue    []*Node
	errs     []NodeError
	copyDeps [][2]*Node // {current, coprovisioned}
}

type ruleKey struct{ typ, class, id string }

// Compile builds the resource graph of manifest m deployed in ctx. It
// returns every error it finds at once: a *ValidationError when the
// manifest itself is malformed, else a *CompileError listing the node
// errors (unknown types, unmatched resources, param errors, cycles, …). The
// graph is returned even with a CompileError, for display.
func Compile(cat *Catalogue, ctx Context, m *Manifest) (*Graph, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	c := &compiler{
		g: &Graph{
			Context:   ctx,
			Workloads: map[string]*Node{},
			byCoord:   map[Coord]*Node{},
			providers: map[string]*Provider{},
			tpl:       map[string]template{},
			selects:   map[selectKey][]*Node{},
		},
		cat:     cat,
		types:   map[string]*ResourceType{},
		modules: map[string]*Module{},
	}
	for _, t := range cat.ResourceTypes {
		c.types[t.ID] = t
	}
	for _, mod := range cat.Modules {
		c.modules[mod.ID] = mod
	}
	for _, p := range cat.Providers {
		c.g.providers[p.Ref()] = p
	}
	c.indexRules(ctx)
	c.seed(m)
	for len(c.queue) > 0 {
		n := c.queue[0]
		c.queue = c.queue[1:]
		c.expand(n)
	}
	g := c.g
	g.Nodes = make([]*Node, 0, len(g.byCoord))
	for _, n := range g.byCoord {
		g.Nodes = append(g.Nodes, n)
		if n.Module != nil {
			n.Block = blockName(n.Coord)
		}
	}
	sort.Slice(g.Nodes, func(i, j int) bool { return g.Nodes[i].Coord.Less(g.Nodes[j].Coord) })
	c.placeholderEdges(false)
	c.copyDependents()
	c.placeholderEdges(true)
	c.cycles()
	c.checkParams()
	if len(c.errs) > 0 {
		sort.SliceStable(c.errs, func(i, j int) bool {
			a, b := c.errs[i], c.errs[j]
			if a.Node != b.Node {
				return a.Node.Less(b.Node)
			}
			return false
		})
		return g, &CompileError{Errors: dedupeErrs(c.errs)}
	}
	return g, nil
}

func dedupeErrs(errs []NodeError) []NodeError {
	out := errs[:0]
	seen := map[NodeError]bool{}
	for _, e := range errs {
		if !seen[e] {
			seen[e] = true
			out = append(out, e)
		}
	}
	return out
}

func (c *compiler) fail(n *Node, code, format string, args ...any) {
	c.errs = append(c.errs, NodeError{Node: n.Coord, Code: code, Detail: fmt.Sprintf(format, args...)})
}

// indexRules keeps, for each (type, class, resource id) group, the rule
// effective in ctx with the highest specificity: env_id 4, project_id 2,
// env_type_id 1. Rules naming an unknown module are ignored.
func (c *compiler) indexRules(ctx Context) {
	c.rules = map[ruleKey]*ModuleRule{}
	spec := func(r *ModuleRule) int {
		s := 0
		if r.EnvID != "" {
			s |= 4
		}
		if r.ProjectID != "" {
			s |= 2
		}
		if r.EnvTypeID != "" {
			s |= 1
		}
		return s
	}
	for _, r := range c.cat.Rules {
		mod := c.modules[r.ModuleID]
		if mod == nil ||
			(r.ProjectID != "" && r.ProjectID != ctx.ProjectID) ||
			(r.EnvTypeID != "" && r.EnvTypeID != ctx.EnvTypeID) ||
			(r.EnvID != "" && r.EnvID != ctx.EnvID) {
			continue
		}
		k := ruleKey{mod.ResourceType, r.Class(), r.ResourceID}
		old := c.rules[k]
		if old == nil || spec(r) > spec(old) || (spec(r) == spec(old) && r.ID+r.ModuleID < old.ID+old.ModuleID) {
			c.rules[k] = r
		}
	}
}

// selectModule finds the rule for a coordinate: the exact resource id
// first, then a rule without resource id, of the exact type and class.
func (c *compiler) selectModule(co Coord) *ModuleRule {
	if r := c.rules[ruleKey{co.Type, co.Class, co.ID}]; r != nil {
		return r
	}
	return c.rules[ruleKey{co.Type, co.Class, ""}]
}

// node returns the node at co, adding it (and queueing its expansion) when
// new. Params are set by the first request that has any; a later request
// with different params is an error.
func (c *compiler) node(co Coord, params map[string]any, sc *scope, by *Node) *Node {
	n := c.g.byCoord[co]
	if n == nil {
		n = &Node{Coord: co, deps: map[*Node]string{}, consumers: map[*Node]bool{}, aliases: map[string]*Node{}}
		c.g.byCoord[co] = n
		c.queue = append(c.queue, n)
	}
	if params != nil {
		switch {
		case n.Params == nil:
			n.Params, n.paramsScope = params, sc
		case !reflect.DeepEqual(n.Params, params):
			who := "the manifest"
			if by != nil {
				who = by.Coord.String()
			}
			c.fail(n, ErrParamsMismatch, "requested again by %s with different params", who)
		}
	}
	return n
}

func (c *compiler) edge(from, to *Node, alias string) {
	if old, ok := from.deps[to]; ok && (old != "" || alias == "") {
		return
	}
	from.deps[to] = alias
	to.consumers[from] = true
}

func defaultClass(class string) string {
	if class == "" {
		return DefaultClass
	}
	return class
}

// seed adds the shared resources, a node per workload, and the workload's
// resources with edges workload → resource.
func (c *compiler) seed(m *Manifest) {
	shared := map[string]*Node{}
	manifestAllow := allowed{kinds: kindSet(refContext), contextKeys: manifestCtxKeys, shared: m.Shared}
	sharedScope := &scope{shared: shared, allow: manifestAllow}
	for _, a := range sortedKeys(m.Shared) {
		r := m.Shared[a]
		id := r.ID
		if id == "" {
			id = "shared." + a
		}
		n := c.node(Coord{r.Type, defaultClass(r.Class), id}, r.Params, sharedScope, nil)
		shared[a] = n
		c.checkAccessible(n)
	}
	for _, w := range sortedKeys(m.Workloads) {
		wl := m.Workloads[w]
		wn := c.node(Coord{WorkloadType, DefaultClass, w}, nil, nil, nil)
		wn.Workload = w
		wn.Outputs = wl.allOutputs()
		c.g.Workloads[w] = wn
		allow := allowed{kinds: kindSet(refContext, refResources, refShared), contextKeys: manifestCtxKeys, aliases: wl.Resources, shared: m.Shared}
		sc := &scope{node: wn, aliases: wn.aliases, shared: shared, allow: allow}
		wn.paramsScope = sc
		for _, a := range sortedKeys(wl.Resources) {
			r := wl.Resources[a]
			id := r.ID
			if id == "" {
				id = "workloads." + w + "." + a
			}
			n := c.node(Coord{r.Type, defaultClass(r.Class), id}, r.Params, sc, wn)
			wn.aliases[a] = n
			c.edge(wn, n, a)
			c.checkAccessible(n)
		}
	}
}

func (c *compiler) checkAccessible(n *Node) {
	if rt := c.types[n.Type]; rt != nil && !rt.DeveloperAccessible() {
		c.fail(n, ErrNotAccessible, "resource type %q is not developer accessible; it can only be a module dependency", n.Type)
	}
}

// expand matches n to a module and adds the module's dependencies and
// coprovisioned resources.
func (c *compiler) expand(n *Node) {
	n.rt = c.types[n.Type]
	rule := c.selectModule(n.Coord)
	if n.Type == WorkloadType && n.Workload != "" && rule == nil {
		return // a workload without module: outputs only
	}
	if n.rt == nil && n.Type != WorkloadType {
		c.fail(n, ErrUnknownType, "resource type %q does not exist", n.Type)
		return
	}
	if rule == nil {
		c.fail(n, ErrNoRuleMatch, "no module rule matches resource type %q, class %q, id %q in project %q, environment %q (type %q)",
			n.Type, n.Class, n.ID, c.g.Context.ProjectID, c.g.Context.EnvID, c.g.Context.EnvTypeID)
		return
	}
	mod := c.modules[rule.ModuleID]
	n.Module, n.Rule = mod, rule
	for _, local := range sortedKeys(mod.ProviderMapping) {
		if c.g.providers[mod.ProviderMapping[local]] == nil {
			c.fail(n, ErrProvider, "module %q: provider_mapping.%s: provider %q does not exist", mod.ID, local, mod.ProviderMapping[local])
		}
	}
	allow := allowModule.withAliases(mod.Dependencies)
	sc := &scope{node: n, aliases: n.aliases, allow: allow}
	resolve := func(field string, r Request) (Coord, bool) {
		co := Coord{Type: r.Type, Class: DefaultClass, ID: n.ID}
		if r.Class != "" {
			co.Class = strings.ReplaceAll(r.Class, "@", n.Class)
		}
		if r.ID != "" {
			co.ID = strings.ReplaceAll(r.ID, "@", n.ID)
		}
		ok := true
		if !typeRE.MatchString(co.Class) {
			c.fail(n, ErrInvalidResource, "module %q: %s.class resolves to %q, which is not a valid class", mod.ID, field, co.Class)
			ok = false
		}
		if !resourceIDRE.MatchString(co.ID) {
			c.fail(n, ErrInvalidResource, "module %q: %s.id resolves to %q, which is not a valid resource id", mod.ID, field, co.ID)
			ok = false
		}
		return co, ok
	}
	for _, alias := range sortedKeys(mod.Dependencies) {
		d := mod.Dependencies[alias]
		co, ok := resolve("dependencies."+alias, d)
		if !ok {
			continue
		}
		child := c.node(co, d.Params, sc, n)
		n.aliases[alias] = child
		c.edge(n, child, alias)
	}
	for i, cp := range mod.Coprovisioned {
		co, ok := resolve(fmt.Sprintf("coprovisioned[%d]", i), cp.Request)
		if !ok {
			continue
		}
		child := c.node(co, cp.Params, sc, n)
		if child == n {
			continue
		}
		if cp.IsDependentOnCurrent {
			c.edge(child, n, "")
		}
		if cp.CopyDependentsFromCurrent {
			c.copyDeps = append(c.copyDeps, [2]*Node{n, child})
		}
	}
}

// copyDependents makes every consumer of a current node depend on its
// coprovisioned node, repeating until nothing changes (a coprovisioned node
// may itself be another's current node).
func (c *compiler) copyDependents() {
	for changed := true; changed; {
		changed = false
		for _, cd := range c.copyDeps {
			cur, cop := cd[0], cd[1]
			for _, x := range sortedNodes(cur.consumers) {
				if x == cop {
					continue
				}
				if _, ok := x.deps[cop]; !ok {
					c.edge(x, cop, "")
					changed = true
				}
			}
		}
	}
}

// template parses s once per compile.
func (g *Graph) template(s string) (template, error) {
	if t, ok := g.tpl[s]; ok {
		return t, nil
	}
	t, err := parseTemplate(s)
	if err == nil {
		g.tpl[s] = t
	}
	return t, err
}

// fields lists the placeholder-bearing values of a node with their scopes.
func (n *Node) fields() []struct {
	name string
	v    any
	sc   *scope
} {
	type f = struct {
		name string
		v    any
		sc   *scope
	}
	var out []f
	if n.Module != nil {
		sc := &scope{node: n, aliases: n.aliases, allow: allowModule.withAliases(n.Module.Dependencies)}
		out = append(out, f{"module_inputs", map[string]any(n.Module.ModuleInputs), sc})
	}
	if n.Params != nil && n.paramsScope != nil {
		out = append(out, f{"params", n.Params, n.paramsScope})
	}
	if n.Outputs != nil {
		out = append(out, f{"outputs", n.Outputs, n.paramsScope})
	}
	return out
}

// placeholderEdges adds an edge from each node to every node its inputs,
// params and outputs refer to: resources, shared and self placeholders in
// the first pass, select placeholders (which need the finished graph) in
// the second. Select results are evaluated on the graph before any select
// edge is added, so they do not depend on node order.
func (c *compiler) placeholderEdges(selects bool) {
	type pending struct{ from, to *Node }
	var add []pending
	for _, n := range c.g.Nodes {
		for _, f := range n.fields() {
			walkStrings(f.v, f.name, func(path, s string) {
				t, err := c.g.template(s)
				if err != nil {
					if !selects {
						c.fail(n, ErrPlaceholder, "%s: %v", path, err)
					}
					return
				}
				for _, r := range t.refs() {
					if selects != (r.kind == refSelect) {
						continue
					}
					if msg := f.sc.allow.check(r); msg != "" {
						c.fail(n, ErrPlaceholder, "%s: %s", path, msg)
						continue
					}
					for _, target := range c.g.targets(f.sc, r) {
						if target.Module == nil && target.Workload != "" {
							c.fail(n, ErrPlaceholder, "%s: ${%s} refers to workload %q, which has no module and so no outputs", path, r.raw, target.Workload)
							continue
						}
						if target != n {
							add = append(add, pending{n, target})
						}
					}
				}
			})
		}
	}
	for _, p := range add {
		c.edge(p.from, p.to, "")
	}
}

// targets returns the nodes a placeholder refers to in scope sc.
func (g *Graph) targets(sc *scope, r *ref) []*Node {
	switch r.kind {
	case refResources:
		if n := sc.aliases[r.alias]; n != nil {
			return []*Node{n}
		}
	case refShared:
		if n := sc.shared[r.alias]; n != nil {
			return []*Node{n}
		}
	case refSelf:
		if sc.node != nil {
			return []*Node{sc.node}
		}
	case refSelect:
		if sc.node == nil {
			return nil
		}
		k := selectKey{sc.node, r.raw}
		if res, ok := g.selects[k]; ok {
			return res
		}
		res := g.evalSelect(sc.node, r)
		g.selects[k] = res
		return res
	}
	return nil
}

// evalSelect walks the select chain from n, one hop per step, and returns
// the matched nodes sorted by coordinate. "@" in a filter's class or id
// stands for n's.
func (g *Graph) evalSelect(n *Node, r *ref) []*Node {
	cur := map[*Node]bool{n: true}
	for _, st := range r.steps {
		class := strings.ReplaceAll(st.class, "@", n.Class)
		id := strings.ReplaceAll(st.id, "@", n.ID)
		next := map[*Node]bool{}
		for x := range cur {
			var hop []*Node
			if st.consumers {
				hop = sortedNodes(x.consumers)
			} else {
				hop = sortedNodes(x.deps)
			}
			for _, y := range hop {
				if y.Type == st.typ && (class == "" || y.Class == class) && (id == "" || y.ID == id) {
					next[y] = true
				}
			}
		}
		cur = next
	}
	return sortedNodes(cur)
}

// cycles reports every node on a dependency cycle, with one cycle through
// it (Tarjan's strongly connected components).
func (c *compiler) cycles() {
	nodes := c.g.Nodes
	index := map[*Node]int{}
	low := map[*Node]int{}
	on := map[*Node]bool{}
	var stack []*Node
	next := 0
	var sccs [][]*Node
	type frame struct {
		n    *Node
		deps []*Node
		i    int
	}
	for _, root := range nodes {
		if _, seen := index[root]; seen {
			continue
		}
		// iterative Tarjan: deep graphs must not overflow the stack
		work := []*frame{{n: root, deps: root.Dependencies()}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		on[root] = true
		for len(work) > 0 {
			f := work[len(work)-1]
			if f.i < len(f.deps) {
				d := f.deps[f.i]
				f.i++
				if _, seen := index[d]; !seen {
					index[d], low[d] = next, next
					next++
					stack = append(stack, d)
					on[d] = true
					work = append(work, &frame{n: d, deps: d.Dependencies()})
				} else if on[d] && index[d] < low[f.n] {
					low[f.n] = index[d]
				}
				continue
			}
			work = work[:len(work)-1]
			if len(work) > 0 {
				p := work[len(work)-1].n
				if low[f.n] < low[p] {
					low[p] = low[f.n]
				}
			}
			if low[f.n] == index[f.n] {
				var scc []*Node
				for {
					x := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					on[x] = false
					scc = append(scc, x)
					if x == f.n {
						break
					}
				}
				if len(scc) > 1 {
					sccs = append(sccs, scc)
				} else if _, self := scc[0].deps[scc[0]]; self {
					sccs = append(sccs, scc)
				}
			}
		}
	}
	for _, scc := range sccs {
		in := map[*Node]bool{}
		for _, x := range scc {
			in[x] = true
		}
		for _, x := range scc {
			path := cyclePath(x, in)
			parts := make([]string, len(path))
			for i, p := range path {
				parts[i] = p.Coord.String()
			}
			c.fail(x, ErrCycle, "dependency cycle: %s", strings.Join(parts, " -> "))
		}
	}
}

// cyclePath is a shortest path from x back to x inside the component.
func cyclePath(x *Node, in map[*Node]bool) []*Node {
	prev := map[*Node]*Node{}
	queue := []*Node{x}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, d := range n.Dependencies() {
			if !in[d] {
				continue
			}
			if d == x {
				path := []*Node{x}
				for p := n; p != x; p = prev[p] {
					path = append(path, p)
				}
				// path is x, n, …, reversed order after x; fix it up
				for i, j := 1, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return append(path, x)
			}
			if _, seen := prev[d]; !seen && d != x {
				prev[d] = n
				queue = append(queue, d)
			}
		}
	}
	return []*Node{x, x}
}

// checkParams checks each matched node's params and inputs against its
// module. Params may fill any variable of the module's code and win over
// module_inputs; module_params, where a module declares them, type and
// require params (a value that is exactly one placeholder is not type
// checked). When the module's variables are known (inline code, or
// Catalogue.Interfaces), a param that is no variable is an error, and so
// is a variable with no default that neither inputs nor params set.
func (c *compiler) checkParams() {
	for _, n := range c.g.Nodes {
		if n.Module == nil {
			continue
		}
		mp := n.Module.ModuleParams
		for _, k := range sortedKeys(mp) {
			_, byParam := n.Params[k]
			_, byInput := n.Module.ModuleInputs[k]
			if !byParam && !byInput && !mp[k].IsOptional {
				c.fail(n, ErrParam, "params.%s: required by module %q (type %s) but not set", k, n.Module.ID, mp[k].Type)
			}
		}
		mi := c.cat.iface(n.Module)
		for _, k := range sortedKeys(n.Params) {
			p, declared := mp[k]
			if !declared {
				if mi != nil {
					if _, ok := mi.Variables[k]; !ok {
						c.fail(n, ErrParam, "params.%s: module %q has no variable %q (variables: %s)", k, n.Module.ID, k, strings.Join(sortedKeys(mi.Variables), ", "))
					}
				}
				continue
			}
			v := n.Params[k]
			if s, ok := v.(string); ok {
				if t, err := c.g.template(s); err == nil && t.bare() != nil {
					continue
				}
			}
			if got := valueType(v); !typeMatches(p.Type, got) {
				c.fail(n, ErrParam, "params.%s: module %q expects %s, got %s", k, n.Module.ID, p.Type, got)
			}
		}
		if mi == nil {
			continue
		}
		for _, v := range sortedKeys(mi.Variables) {
			_, byParam := n.Params[v]
			_, byInput := n.Module.ModuleInputs[v]
			if !mi.Variables[v] && !byParam && !byInput {
				c.fail(n, ErrMissingVariable, "module %q: variable %q has no default and no value: set it in the module's module_inputs or pass it as a param", n.Module.ID, v)
			}
		}
	}
}

func valueType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "bool"
	case float64, float32, int, int64, int32, uint, uint64, jsonNumber:
		return "number"
	case []any:
		return "list"
	case map[string]any:
		return "map"
	}
	return fmt.Sprintf("%T", v)
}

func typeMatches(want, got string) bool {
	return want == "any" || want == got
}

func sortedNodes[V any](m map[*Node]V) []*Node {
	out := make([]*Node, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Coord.Less(out[j].Coord) })
	return out
}

// blockName is the node's Terraform module block name:
// <type>_<class>_<id> with other characters as "_", cut to 91 characters,
// then "_" and 8 hex digits of the coordinate's sha256 (unique even after
// the cut and the replacements).
func blockName(c Coord) string {
	raw := c.Type + "_" + c.Class + "_" + c.ID
	b := []byte(raw)
	for i, ch := range b {
		if !(ch >= 'a' && ch <= 'z' || ch >= 'A' && ch <= 'Z' || ch >= '0' && ch <= '9' || ch == '_' || ch == '-') {
			b[i] = '_'
		}
	}
	if len(b) > 91 {
		b = b[:91]
	}
	if b[0] >= '0' && b[0] <= '9' || b[0] == '-' {
		b = append([]byte{'r'}, b...)
	}
	sum := sha256.Sum256([]byte(c.String()))
	return string(b) + "_" + hex.EncodeToString(sum[:4])
}
