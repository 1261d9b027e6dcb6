package stack

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// validate checks what spans blocks and files: names, references,
// providers, the component graph, deployment groups and limits. It runs
// only on files that parsed cleanly, so every block is complete.
func (p *parser) validate(nComp, nDeploy int) {
	cfg := p.cfg
	if nComp == 0 || len(cfg.Components)+len(cfg.Stacks) == 0 {
		p.extra = append(p.extra, Diagnostic{Severity: SeverityError, Summary: "No components",
			Detail: "A stack needs at least one component block in a file ending in " + ComponentSuffix + "."})
	}
	if nDeploy == 0 || len(cfg.Deployments) == 0 {
		p.extra = append(p.extra, Diagnostic{Severity: SeverityError, Summary: "No deployments",
			Detail: "A stack needs at least one deployment block in a file ending in " + DeploySuffix + "."})
	}
	if len(cfg.Deployments) > MaxDeployments {
		d := cfg.Deployments[MaxDeployments]
		p.errorf(d.DeclRange.Ptr(), "Too many deployments", "A stack has at most %d deployments; this is number %d.", MaxDeployments, len(cfg.Deployments))
	}
	if len(cfg.UpstreamInputs) > MaxUpstreams {
		p.errorf(cfg.UpstreamInputs[MaxUpstreams].DeclRange.Ptr(), "Too many upstream inputs", "A stack reads from at most %d upstream stacks.", MaxUpstreams)
	}
	p.duplicates()
	p.providers()
	p.componentRefs()
	p.cycles()
	p.groups()
	p.deployRefs()
	p.deploymentInputs()
}

type named struct {
	name string
	r    hcl.Range
}

func (p *parser) unique(what string, items []named) {
	seen := map[string]hcl.Range{}
	for _, it := range items {
		if prev, ok := seen[it.name]; ok {
			p.errorf(it.r.Ptr(), "Duplicate "+what, "A %s named %q is already declared at %s.", what, it.name, prev)
			continue
		}
		seen[it.name] = it.r
	}
}

func (p *parser) duplicates() {
	cfg := p.cfg
	var comps, provs, vars, outs, locs, dlocs, deps, groups, aas, pubs, ups, toks []named
	for _, c := range cfg.Components {
		comps = append(comps, named{c.Name, c.DeclRange})
	}
	for _, s := range cfg.Stacks {
		comps = append(comps, named{s.Name, s.DeclRange})
	}
	for _, x := range cfg.Providers {
		provs = append(provs, named{x.Type + "." + x.Alias, x.DeclRange})
	}
	for _, x := range cfg.Variables {
		vars = append(vars, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.Outputs {
		outs = append(outs, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.Locals {
		locs = append(locs, named{x.Name, x.Range})
	}
	for _, x := range cfg.DeployLocals {
		dlocs = append(dlocs, named{x.Name, x.Range})
	}
	for _, x := range cfg.Deployments {
		deps = append(deps, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.DeploymentGroups {
		groups = append(groups, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.AutoApproves {
		aas = append(aas, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.PublishOutputs {
		pubs = append(pubs, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.UpstreamInputs {
		ups = append(ups, named{x.Name, x.DeclRange})
	}
	for _, x := range cfg.IdentityTokens {
		toks = append(toks, named{x.Name, x.DeclRange})
	}
	p.unique("component", comps)
	p.unique("provider", provs)
	p.unique("variable", vars)
	p.unique("output", outs)
	p.unique("local value", locs)
	p.unique("local value", dlocs)
	p.unique("deployment", deps)
	p.unique("deployment group", groups)
	p.unique("deployment_auto_approve", aas)
	p.unique("publish_output", pubs)
	p.unique("upstream_input", ups)
	p.unique("identity_token", toks)
}

func (p *parser) providerDefined(t, alias string) bool {
	for _, x := range p.cfg.Providers {
		if x.Type == t && x.Alias == alias {
			return true
		}
	}
	return false
}

func (p *parser) providers() {
	for _, x := range p.cfg.Providers {
		if _, ok := p.cfg.RequiredProviders[x.Type]; !ok {
			p.errorf(x.DeclRange.Ptr(), "Provider not required", "The provider type %q is not declared in required_providers; add %s = { source = \"…\", version = \"…\" } there.", x.Type, x.Type)
		}
	}
	check := func(refs []*ProviderRef) {
		for _, r := range refs {
			if !p.providerDefined(r.Type, r.Alias) {
				p.errorf(r.Range.Ptr(), "Undefined provider", "There is no provider %q %q block; declare provider %q %q { … } in a component file.", r.Type, r.Alias, r.Type, r.Alias)
			}
		}
	}
	for _, c := range p.cfg.Components {
		check(c.Providers)
	}
	for _, r := range p.cfg.Removed {
		check(r.Providers)
	}
}

// traversals lists the references in an expression or a body.
func traversals(v any) []hcl.Traversal {
	switch x := v.(type) {
	case nil:
		return nil
	case hcl.Expression:
		return x.Variables()
	case *hclsyntax.Body:
		var out []hcl.Traversal
		for _, a := range x.Attributes {
			out = append(out, a.Expr.Variables()...)
		}
		for _, b := range x.Blocks {
			out = append(out, traversals(b.Body)...)
		}
		return out
	}
	return nil
}

func attrName(tr hcl.Traversal, i int) (string, bool) {
	if len(tr) <= i {
		return "", false
	}
	switch s := tr[i].(type) {
	case hcl.TraverseAttr:
		return s.Name, true
	}
	return "", false
}

func (p *parser) refError(tr hcl.Traversal, summary, format string, args ...any) {
	r := tr.SourceRange()
	p.errorf(&r, summary, format, args...)
}

// checkComponentRef checks one reference made in a component file; it
// returns the component it names, if any.
func (p *parser) checkComponentRef(tr hcl.Traversal) string {
	root := tr.RootName()
	name, ok := attrName(tr, 1)
	switch root {
	case "each", "stack":
		return ""
	case "var":
		if ok && !hasName(p.cfg.Variables, name, func(v *Variable) string { return v.Name }) {
			p.refError(tr, "Undeclared variable", "There is no variable %q; declare it with a variable block and a type.", name)
		}
	case "local":
		if ok && !hasName(p.cfg.Locals, name, func(v *Local) string { return v.Name }) {
			p.refError(tr, "Undeclared local value", "There is no local value %q in the component files.", name)
		}
	case "component":
		if ok && p.cfg.Component(name) == nil && !hasName(p.cfg.Stacks, name, func(v *EmbeddedStack) string { return v.Name }) {
			p.refError(tr, "Undeclared component", "There is no component %q.", name)
			return ""
		}
		return name
	case "provider":
		alias, ok2 := attrName(tr, 2)
		if ok && ok2 && !p.providerDefined(name, alias) {
			p.refError(tr, "Undefined provider", "There is no provider %q %q block.", name, alias)
		}
	default:
		p.refError(tr, "Unknown reference", "%q is not something a component file can refer to; use var, local, component, provider or each.", root)
	}
	if !ok {
		p.refError(tr, "Invalid reference", "A reference to %s must name one, like %s.<name>.", root, root)
	}
	return ""
}

func hasName[T any](xs []T, name string, f func(T) string) bool {
	for _, x := range xs {
		if f(x) == name {
			return true
		}
	}
	return false
}

func (p *parser) componentRefs() {
	for _, c := range p.cfg.Components {
		needs := map[string]bool{}
		for _, tr := range append(traversals(c.Inputs), traversals(c.ForEach)...) {
			if n := p.checkComponentRef(tr); n != "" {
				needs[n] = true
			}
		}
		for _, pr := range c.Providers {
			if pr.Key != nil {
				for _, tr := range pr.Key.Variables() {
					p.checkComponentRef(tr)
				}
			}
		}
		for _, d := range c.DependsOn {
			if p.cfg.Component(d) == nil {
				p.errorf(c.DeclRange.Ptr(), "Undeclared component", "The component %q depends on %q, which is not declared.", c.Name, d)
				continue
			}
			needs[d] = true
		}
		for n := range needs {
			c.Needs = append(c.Needs, n)
		}
		sort.Strings(c.Needs)
	}
	for _, s := range p.cfg.Stacks {
		for _, tr := range traversals(s.Inputs) {
			p.checkComponentRef(tr)
		}
	}
	for _, pr := range p.cfg.Providers {
		for _, tr := range append(traversals(pr.ForEach), traversals(pr.Config)...) {
			p.checkComponentRef(tr)
		}
	}
	for _, o := range p.cfg.Outputs {
		for _, tr := range traversals(o.Value) {
			p.checkComponentRef(tr)
		}
	}
	for _, l := range p.cfg.Locals {
		for _, tr := range traversals(l.Expr) {
			p.checkComponentRef(tr)
		}
	}
	for _, r := range p.cfg.Removed {
		for _, tr := range traversals(r.ForEach) {
			p.checkComponentRef(tr)
		}
		if p.cfg.Component(r.From) != nil {
			p.errorf(r.DeclRange.Ptr(), "Removed component still declared", "The removed block names component %q, which is still declared; delete the component block or the removed block.", r.From)
		}
	}
}

// cycles reports a cycle in the component graph, if any, once.
func (p *parser) cycles() {
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found []string
	var visit func(n string) bool
	visit = func(n string) bool {
		color[n] = grey
		stack = append(stack, n)
		c := p.cfg.Component(n)
		if c != nil {
			for _, m := range c.Needs {
				switch color[m] {
				case grey:
					i := len(stack) - 1
					for stack[i] != m {
						i--
					}
					found = append(append([]string{}, stack[i:]...), m)
					return true
				case white:
					if visit(m) {
						return true
					}
				}
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
		return false
	}
	for _, c := range p.cfg.Components {
		if color[c.Name] == white && visit(c.Name) {
			parts := make([]string, len(found))
			for i, n := range found {
				parts[i] = "component." + n
			}
			first := p.cfg.Component(found[0])
			p.errorf(first.DeclRange.Ptr(), "Component cycle", "The components depend on each other in a cycle: %s.", strings.Join(parts, " → "))
			return
		}
	}
}

func (p *parser) groups() {
	cfg := p.cfg
	members := map[string][]string{}
	for _, d := range cfg.Deployments {
		if d.Group == "" {
			d.Group = DefaultGroup(d.Name)
			if cfg.Group(d.Group) != nil {
				p.errorf(d.DeclRange.Ptr(), "Reserved group name", "The deployment group %q is reserved for deployment %q, which has no deployment_group.", d.Group, d.Name)
				continue
			}
			cfg.DeploymentGroups = append(cfg.DeploymentGroups, &DeploymentGroup{Name: d.Group, Implicit: true, DeclRange: d.DeclRange})
		} else if cfg.Group(d.Group) == nil {
			p.errorf(d.DeclRange.Ptr(), "Undeclared deployment group", "The deployment %q names group %q, which is not declared.", d.Name, d.Group)
			continue
		}
		members[d.Group] = append(members[d.Group], d.Name)
	}
	for _, g := range cfg.DeploymentGroups {
		if len(members[g.Name]) > 1 {
			p.errorf(g.DeclRange.Ptr(), "Too many deployments in a group", "A deployment group holds one deployment; %q holds %s.", g.Name, strings.Join(members[g.Name], ", "))
		}
		for _, a := range g.AutoApproveChecks {
			if cfg.AutoApproveRule(a) == nil {
				p.errorf(g.DeclRange.Ptr(), "Undeclared deployment_auto_approve", "The group %q lists %q in auto_approve_checks, which is not declared.", g.Name, a)
			}
		}
	}
}

// checkDeployRef checks one reference made in a deployment file.
// allowContext permits context and deployment (inside checks).
func (p *parser) checkDeployRef(tr hcl.Traversal, allowContext bool) {
	root := tr.RootName()
	name, ok := attrName(tr, 1)
	switch root {
	case "local":
		if ok && !hasName(p.cfg.DeployLocals, name, func(v *Local) string { return v.Name }) {
			p.refError(tr, "Undeclared local value", "There is no local value %q in the deployment files.", name)
		}
	case "identity_token":
		if ok && !hasName(p.cfg.IdentityTokens, name, func(v *IdentityToken) string { return v.Name }) {
			p.refError(tr, "Undeclared identity token", "There is no identity_token %q.", name)
		}
	case "upstream_input":
		if ok && !hasName(p.cfg.UpstreamInputs, name, func(v *UpstreamInput) string { return v.Name }) {
			p.refError(tr, "Undeclared upstream input", "There is no upstream_input %q.", name)
		}
	case "store":
		n, ok2 := attrName(tr, 2)
		if !ok || name != "varset" || !ok2 {
			p.refError(tr, "Invalid reference", "A store is referred to as store.varset.<name>.<variable>.")
			return
		}
		if !hasName(p.cfg.Stores, n, func(v *VarsetStore) string { return v.Name }) {
			p.refError(tr, "Undeclared store", "There is no store \"varset\" %q.", n)
		}
		return
	case "deployment":
		if ok && p.cfg.Deployment(name) == nil {
			p.refError(tr, "Undeclared deployment", "There is no deployment %q.", name)
		}
	case "context":
		if !allowContext {
			p.refError(tr, "Unknown reference", "context is only available inside deployment_auto_approve checks.")
		}
		return
	default:
		p.refError(tr, "Unknown reference", "%q is not something a deployment file can refer to.", root)
		return
	}
	if !ok {
		p.refError(tr, "Invalid reference", "A reference to %s must name one, like %s.<name>.", root, root)
	}
}

func (p *parser) deployRefs() {
	for _, d := range p.cfg.Deployments {
		for _, tr := range traversals(d.Inputs) {
			if tr.RootName() == "deployment" {
				p.refError(tr, "Unknown reference", "A deployment's inputs cannot read other deployments.")
				continue
			}
			p.checkDeployRef(tr, false)
		}
	}
	for _, l := range p.cfg.DeployLocals {
		for _, tr := range traversals(l.Expr) {
			p.checkDeployRef(tr, false)
		}
	}
	for _, o := range p.cfg.PublishOutputs {
		for _, tr := range traversals(o.Value) {
			p.checkDeployRef(tr, false)
		}
	}
	for _, a := range p.cfg.AutoApproves {
		for _, c := range a.Checks {
			for _, tr := range append(traversals(c.Condition), traversals(c.Reason)...) {
				p.checkDeployRef(tr, true)
			}
		}
	}
}

// deploymentInputs compares a deployment's inputs, when they are written
// as an object, with the declared variables: unknown names and missing
// required variables are errors.
func (p *parser) deploymentInputs() {
	for _, d := range p.cfg.Deployments {
		keys := map[string]bool{}
		if d.Inputs != nil {
			pairs, diags := hcl.ExprMap(d.Inputs)
			if diags.HasErrors() {
				continue // an expression computing the object: checked at plan time
			}
			for _, kv := range pairs {
				k := hcl.ExprAsKeyword(kv.Key)
				if k == "" {
					v, dd := kv.Key.Value(nil)
					if dd.HasErrors() || !v.IsKnown() || v.IsNull() || v.Type().FriendlyName() != "string" {
						continue
					}
					k = v.AsString()
				}
				keys[k] = true
				if !hasName(p.cfg.Variables, k, func(v *Variable) string { return v.Name }) {
					p.errorf(kv.Key.Range().Ptr(), "Undeclared variable", "The deployment %q sets input %q, which no variable block declares.", d.Name, k)
				}
			}
		}
		for _, v := range p.cfg.Variables {
			if !keys[v.Name] && !v.HasDefault {
				p.errorf(d.DeclRange.Ptr(), "Missing input", "The deployment %q does not set the variable %q, which has no default.", d.Name, v.Name)
			}
		}
	}
}
