package stack

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// MaxFileSize bounds one configuration file; larger files are refused
// with a diagnostic rather than parsed.
const MaxFileSize = 1 << 20

// IsConfigFile reports whether name (a path inside a configuration
// archive) is one of the stack's own files: a component or deployment file
// at the root. Files in sub-folders belong to modules.
func IsConfigFile(name string) bool {
	if strings.Contains(name, "/") {
		return false
	}
	return strings.HasSuffix(name, ComponentSuffix) || strings.HasSuffix(name, DeploySuffix) || strings.HasSuffix(name, BetaSuffix)
}

// ParseFS reads the configuration files at the root of fsys.
func ParseFS(fsys fs.FS) (*Config, Diagnostics) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, Diagnostics{{Severity: SeverityError, Summary: "Cannot read the configuration", Detail: err.Error()}}
	}
	files := map[string][]byte{}
	var diags Diagnostics
	for _, e := range entries {
		if !e.Type().IsRegular() || !IsConfigFile(e.Name()) {
			continue
		}
		info, err := e.Info()
		if err == nil && info.Size() > MaxFileSize {
			diags = append(diags, fileDiag(e.Name(), "Configuration file too large", fmt.Sprintf("%s is %d bytes; the limit is %d.", e.Name(), info.Size(), MaxFileSize)))
			continue
		}
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			diags = append(diags, fileDiag(e.Name(), "Cannot read configuration file", err.Error()))
			continue
		}
		files[e.Name()] = b
	}
	cfg, more := Parse(files)
	return cfg, append(diags, more...)
}

func fileDiag(name, summary, detail string) Diagnostic {
	return Diagnostic{Severity: SeverityError, Summary: summary, Detail: detail,
		Range: &Range{Filename: name, Start: Pos{Line: 1, Column: 1}, End: Pos{Line: 1, Column: 1}}}
}

// Parse reads a stack's files: files maps a file name to its content; names
// that are not component or deployment files are ignored. The Config is
// returned even when there are errors (for inspection), but it must not be
// run unless the diagnostics hold no error.
func Parse(files map[string][]byte) (*Config, Diagnostics) {
	p := &parser{cfg: &Config{RequiredProviders: map[string]*RequiredProvider{}}, sources: map[string][]byte{}}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var nComp, nDeploy int
	for _, name := range names {
		src := files[name]
		base := path.Base(name)
		switch {
		case len(src) > MaxFileSize:
			p.extra = append(p.extra, fileDiag(name, "Configuration file too large", fmt.Sprintf("%s is %d bytes; the limit is %d.", name, len(src), MaxFileSize)))
		case strings.HasSuffix(base, BetaSuffix):
			p.extra = append(p.extra, fileDiag(name, "Unsupported file name",
				fmt.Sprintf("%s uses the beta suffix %s, which is no longer supported; rename it to %s.", name, BetaSuffix, strings.TrimSuffix(base, BetaSuffix)+ComponentSuffix)))
		case strings.HasSuffix(base, ComponentSuffix):
			nComp++
			p.sources[name] = src
			if body := p.file(name, src); body != nil {
				p.componentFile(body)
			}
		case strings.HasSuffix(base, DeploySuffix):
			nDeploy++
			p.sources[name] = src
			if body := p.file(name, src); body != nil {
				p.deployFile(body)
			}
		}
	}
	if !p.diags.HasErrors() && len(p.extra) == 0 {
		p.validate(nComp, nDeploy)
	}
	p.cfg.Sources = p.sources
	diags := append(p.extra, fromHCL(p.diags, p.sources)...)
	return p.cfg, diags
}

type parser struct {
	cfg     *Config
	sources map[string][]byte
	diags   hcl.Diagnostics
	extra   Diagnostics // diagnostics without an hcl form
}

func (p *parser) file(name string, src []byte) hcl.Body {
	f, diags := hclsyntax.ParseConfig(src, name, hcl.InitialPos)
	p.diags = append(p.diags, diags...)
	if diags.HasErrors() || f == nil {
		return nil
	}
	return f.Body
}

func (p *parser) errorf(r *hcl.Range, summary, format string, args ...any) {
	p.diags = append(p.diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: fmt.Sprintf(format, args...), Subject: r})
}

var componentFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "component", LabelNames: []string{"name"}},
	{Type: "stack", LabelNames: []string{"name"}},
	{Type: "provider", LabelNames: []string{"type", "alias"}},
	{Type: "required_providers"},
	{Type: "variable", LabelNames: []string{"name"}},
	{Type: "output", LabelNames: []string{"name"}},
	{Type: "locals"},
	{Type: "removed"},
}}

var deployFileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
	{Type: "deployment", LabelNames: []string{"name"}},
	{Type: "deployment_group", LabelNames: []string{"name"}},
	{Type: "deployment_auto_approve", LabelNames: []string{"name"}},
	{Type: "store", LabelNames: []string{"type", "name"}},
	{Type: "publish_output", LabelNames: []string{"name"}},
	{Type: "upstream_input", LabelNames: []string{"name"}},
	{Type: "identity_token", LabelNames: []string{"name"}},
	{Type: "locals"},
	// Beta blocks, refused with a pointer to their replacement.
	{Type: "orchestrate", LabelNames: []string{"type", "name"}},
}}

func (p *parser) content(body hcl.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	c, diags := body.Content(schema)
	p.diags = append(p.diags, diags...)
	if c == nil {
		c = &hcl.BodyContent{Attributes: hcl.Attributes{}}
	}
	return c
}

func (p *parser) componentFile(body hcl.Body) {
	c := p.content(body, componentFileSchema)
	for _, b := range c.Blocks {
		switch b.Type {
		case "component":
			p.component(b)
		case "stack":
			p.embeddedStack(b)
		case "provider":
			p.provider(b)
		case "required_providers":
			p.requiredProviders(b)
		case "variable":
			p.variable(b)
		case "output":
			p.output(b)
		case "locals":
			p.cfg.Locals = append(p.cfg.Locals, p.locals(b)...)
		case "removed":
			p.removed(b)
		}
	}
}

func (p *parser) deployFile(body hcl.Body) {
	c := p.content(body, deployFileSchema)
	for _, b := range c.Blocks {
		switch b.Type {
		case "deployment":
			p.deployment(b)
		case "deployment_group":
			p.deploymentGroup(b)
		case "deployment_auto_approve":
			p.autoApprove(b)
		case "store":
			p.store(b)
		case "publish_output":
			p.publishOutput(b)
		case "upstream_input":
			p.upstreamInput(b)
		case "identity_token":
			p.identityToken(b)
		case "locals":
			p.cfg.DeployLocals = append(p.cfg.DeployLocals, p.locals(b)...)
		case "orchestrate":
			p.errorf(b.DefRange.Ptr(), "Unsupported block type",
				"The beta block orchestrate is no longer supported: declare the checks in a deployment_auto_approve block and list it in a deployment_group's auto_approve_checks.")
		}
	}
}

// Attribute helpers. Each reports its own diagnostic and returns the zero
// value when the expression is not what it must be.

func (p *parser) str(a *hcl.Attribute) string {
	if a == nil {
		return ""
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
		if nv, err := convert.Convert(v, cty.String); err == nil && !diags.HasErrors() && nv.IsKnown() && !nv.IsNull() {
			return nv.AsString()
		}
		p.errorf(a.Expr.Range().Ptr(), "Invalid value", "The argument %q must be a literal string.", a.Name)
		return ""
	}
	return v.AsString()
}

func (p *parser) boolean(a *hcl.Attribute) bool {
	if a == nil {
		return false
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.Bool) {
		p.errorf(a.Expr.Range().Ptr(), "Invalid value", "The argument %q must be true or false.", a.Name)
		return false
	}
	return v.True()
}

func exprOf(a *hcl.Attribute) hcl.Expression {
	if a == nil {
		return nil
	}
	return a.Expr
}

// ref reads an expression of the form kind.name[...] (a reference to
// another block) and returns name and the index expression, if any.
func (p *parser) ref(expr hcl.Expression, what, kind string, parts int) (names []string, key hcl.Expression, ok bool) {
	if idx, isIdx := expr.(*hclsyntax.IndexExpr); isIdx {
		key = idx.Key
		expr = idx.Collection
	}
	tr, diags := hcl.AbsTraversalForExpr(expr)
	if diags.HasErrors() || tr.RootName() != kind || len(tr) < parts+1 {
		p.errorf(expr.Range().Ptr(), "Invalid reference", "%s must be a reference of the form %s.", what, refForm(kind, parts))
		return nil, nil, false
	}
	for _, step := range tr[1 : parts+1] {
		at, isAttr := step.(hcl.TraverseAttr)
		if !isAttr {
			p.errorf(expr.Range().Ptr(), "Invalid reference", "%s must be a reference of the form %s.", what, refForm(kind, parts))
			return nil, nil, false
		}
		names = append(names, at.Name)
	}
	if rest := tr[parts+1:]; len(rest) > 0 {
		if len(rest) == 1 && key == nil {
			if ix, isIx := rest[0].(hcl.TraverseIndex); isIx {
				key = hcl.StaticExpr(ix.Key, ix.SrcRange)
				return names, key, true
			}
		}
		p.errorf(expr.Range().Ptr(), "Invalid reference", "%s must be a reference of the form %s.", what, refForm(kind, parts))
		return nil, nil, false
	}
	return names, key, true
}

func refForm(kind string, parts int) string {
	if kind == "provider" {
		return "provider.<type>.<alias>"
	}
	s := kind
	for i := 0; i < parts; i++ {
		s += ".<name>"
	}
	return s
}

func (p *parser) refList(a *hcl.Attribute, kind string) []string {
	if a == nil {
		return nil
	}
	exprs, diags := hcl.ExprList(a.Expr)
	if diags.HasErrors() {
		p.errorf(a.Expr.Range().Ptr(), "Invalid value", "The argument %q must be a list of %s references.", a.Name, refForm(kind, 1))
		return nil
	}
	var out []string
	for _, e := range exprs {
		if names, _, ok := p.ref(e, "Each element of "+a.Name, kind, 1); ok {
			out = append(out, names[0])
		}
	}
	return out
}

func (p *parser) providerRefs(a *hcl.Attribute) []*ProviderRef {
	if a == nil {
		return nil
	}
	pairs, diags := hcl.ExprMap(a.Expr)
	if diags.HasErrors() {
		p.errorf(a.Expr.Range().Ptr(), "Invalid providers", "The argument %q must be a map of provider names to provider.<type>.<alias> references.", a.Name)
		return nil
	}
	var out []*ProviderRef
	for _, kv := range pairs {
		name := hcl.ExprAsKeyword(kv.Key)
		if name == "" {
			v, d := kv.Key.Value(nil)
			if d.HasErrors() || !v.IsKnown() || v.IsNull() || !v.Type().Equals(cty.String) {
				p.errorf(kv.Key.Range().Ptr(), "Invalid providers", "A key of %q must be a provider's local name.", a.Name)
				continue
			}
			name = v.AsString()
		}
		names, key, ok := p.ref(kv.Value, "The value for provider "+name, "provider", 2)
		if !ok {
			continue
		}
		out = append(out, &ProviderRef{LocalName: name, Type: names[0], Alias: names[1], Key: key, Range: kv.Value.Range()})
	}
	return out
}

func (p *parser) component(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "version"}, {Name: "inputs", Required: true},
		{Name: "providers", Required: true}, {Name: "depends_on"}, {Name: "for_each"},
	}})
	comp := &Component{Name: b.Labels[0], DeclRange: b.DefRange,
		Source: p.str(c.Attributes["source"]), Version: p.str(c.Attributes["version"]),
		Inputs: exprOf(c.Attributes["inputs"]), ForEach: exprOf(c.Attributes["for_each"]),
		Providers: p.providerRefs(c.Attributes["providers"]), DependsOn: p.refList(c.Attributes["depends_on"], "component")}
	p.checkName(b, "component")
	p.cfg.Components = append(p.cfg.Components, comp)
}

func (p *parser) embeddedStack(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "version", Required: true}, {Name: "inputs", Required: true},
	}})
	p.checkName(b, "stack")
	p.cfg.Stacks = append(p.cfg.Stacks, &EmbeddedStack{Name: b.Labels[0], DeclRange: b.DefRange,
		Source: p.str(c.Attributes["source"]), Version: p.str(c.Attributes["version"]), Inputs: exprOf(c.Attributes["inputs"])})
}

func (p *parser) provider(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "for_each"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "config"}},
	})
	pr := &Provider{Type: b.Labels[0], Alias: b.Labels[1], ForEach: exprOf(c.Attributes["for_each"]), DeclRange: b.DefRange}
	for i, cb := range c.Blocks {
		if i > 0 {
			p.errorf(cb.DefRange.Ptr(), "Duplicate config block", "A provider has at most one config block; the first is at line %d.", c.Blocks[0].DefRange.Start.Line)
			continue
		}
		pr.Config = cb.Body
	}
	p.checkName(b, "provider")
	p.cfg.Providers = append(p.cfg.Providers, pr)
}

func (p *parser) requiredProviders(b *hcl.Block) {
	attrs, diags := b.Body.JustAttributes()
	p.diags = append(p.diags, diags...)
	for _, name := range sortedAttrNames(attrs) {
		a := attrs[name]
		if prev, dup := p.cfg.RequiredProviders[name]; dup {
			p.errorf(a.NameRange.Ptr(), "Duplicate required provider", "The provider %q is already required at %s.", name, prev.Range)
			continue
		}
		v, d := a.Expr.Value(nil)
		if d.HasErrors() || !v.IsKnown() || v.IsNull() || !(v.Type().IsObjectType() || v.Type().IsMapType()) {
			p.errorf(a.Expr.Range().Ptr(), "Invalid required provider", "The provider %q must be an object with source and version, like { source = \"hashicorp/aws\", version = \"~> 5.0\" }.", name)
			continue
		}
		rp := &RequiredProvider{Name: name, Range: a.Range}
		for _, field := range []string{"source", "version"} {
			var fv cty.Value
			if v.Type().IsObjectType() && v.Type().HasAttribute(field) {
				fv = v.GetAttr(field)
			} else if v.Type().IsMapType() && v.HasIndex(cty.StringVal(field)).True() {
				fv = v.Index(cty.StringVal(field))
			}
			if fv == cty.NilVal || fv.IsNull() || !fv.IsKnown() || !fv.Type().Equals(cty.String) {
				if field == "version" && rp.Source == BuiltinTerraform {
					continue // built into terraform: it has no versions
				}
				p.errorf(a.Expr.Range().Ptr(), "Invalid required provider", "The provider %q needs a string %q.", name, field)
				continue
			}
			if field == "source" {
				rp.Source = fv.AsString()
			} else {
				rp.Version = fv.AsString()
			}
		}
		if v.Type().IsObjectType() {
			for attr := range v.Type().AttributeTypes() {
				if attr != "source" && attr != "version" {
					p.errorf(a.Expr.Range().Ptr(), "Invalid required provider", "The provider %q has an unknown argument %q; only source and version are allowed.", name, attr)
				}
			}
		}
		p.cfg.RequiredProviders[name] = rp
	}
}

func sortedAttrNames(attrs hcl.Attributes) []string {
	names := make([]string, 0, len(attrs))
	for n := range attrs {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return attrs[names[i]].Range.Start.Byte < attrs[names[j]].Range.Start.Byte })
	return names
}

func (p *parser) variable(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "type"}, {Name: "default"}, {Name: "description"}, {Name: "sensitive"}, {Name: "nullable"}, {Name: "ephemeral"},
	}})
	v := &Variable{Name: b.Labels[0], DeclRange: b.DefRange, Type: cty.DynamicPseudoType, Nullable: true,
		Description: p.str(c.Attributes["description"]), Sensitive: p.boolean(c.Attributes["sensitive"]), Ephemeral: p.boolean(c.Attributes["ephemeral"])}
	if a := c.Attributes["nullable"]; a != nil {
		v.Nullable = p.boolean(a)
	}
	if a := c.Attributes["type"]; a == nil {
		p.errorf(b.DefRange.Ptr(), "Missing variable type", "The variable %q has no type: every variable of a stack must declare one, like type = string.", v.Name)
	} else {
		ty, defs, diags := typeexpr.TypeConstraintWithDefaults(a.Expr)
		p.diags = append(p.diags, diags...)
		if !diags.HasErrors() {
			v.Type, v.TypeDefaults = ty, defs
		}
	}
	if a := c.Attributes["default"]; a != nil {
		val, diags := a.Expr.Value(nil)
		if diags.HasErrors() {
			p.errorf(a.Expr.Range().Ptr(), "Invalid default value", "The default of variable %q must be a literal value.", v.Name)
		} else {
			if v.TypeDefaults != nil {
				val = v.TypeDefaults.Apply(val)
			}
			conv, err := convert.Convert(val, v.Type)
			if err != nil {
				p.errorf(a.Expr.Range().Ptr(), "Invalid default value", "The default of variable %q does not match its type: %s.", v.Name, err)
			} else {
				v.Default, v.HasDefault = conv, true
			}
		}
	}
	p.checkName(b, "variable")
	p.cfg.Variables = append(p.cfg.Variables, v)
}

func (p *parser) output(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "type", Required: true}, {Name: "value", Required: true}, {Name: "description"}, {Name: "sensitive"}, {Name: "ephemeral"},
	}})
	o := &Output{Name: b.Labels[0], DeclRange: b.DefRange, Type: cty.DynamicPseudoType, Value: exprOf(c.Attributes["value"]),
		Description: p.str(c.Attributes["description"]), Sensitive: p.boolean(c.Attributes["sensitive"]), Ephemeral: p.boolean(c.Attributes["ephemeral"])}
	if a := c.Attributes["type"]; a != nil {
		ty, diags := typeexpr.TypeConstraint(a.Expr)
		p.diags = append(p.diags, diags...)
		if !diags.HasErrors() {
			o.Type = ty
		}
	}
	p.checkName(b, "output")
	p.cfg.Outputs = append(p.cfg.Outputs, o)
}

func (p *parser) locals(b *hcl.Block) []*Local {
	attrs, diags := b.Body.JustAttributes()
	p.diags = append(p.diags, diags...)
	var out []*Local
	for _, n := range sortedAttrNames(attrs) {
		a := attrs[n]
		if !hclsyntax.ValidIdentifier(n) {
			p.errorf(a.NameRange.Ptr(), "Invalid local name", "%q is not a valid name.", n)
			continue
		}
		out = append(out, &Local{Name: n, Expr: a.Expr, Range: a.Range})
	}
	return out
}

func (p *parser) removed(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "source", Required: true}, {Name: "from", Required: true}, {Name: "providers", Required: true}, {Name: "for_each"},
	}})
	r := &Removed{DeclRange: b.DefRange, Source: p.str(c.Attributes["source"]), ForEach: exprOf(c.Attributes["for_each"]),
		Providers: p.providerRefs(c.Attributes["providers"])}
	if a := c.Attributes["from"]; a != nil {
		if names, key, ok := p.ref(a.Expr, "The argument \"from\"", "component", 1); ok {
			r.From, r.FromKey = names[0], key
		}
	}
	p.cfg.Removed = append(p.cfg.Removed, r)
}

func (p *parser) deployment(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{
		{Name: "inputs"}, {Name: "deployment_group"}, {Name: "destroy"}, {Name: "import"},
	}})
	d := &Deployment{Name: b.Labels[0], DeclRange: b.DefRange, Inputs: exprOf(c.Attributes["inputs"]),
		Destroy: p.boolean(c.Attributes["destroy"]), Import: p.boolean(c.Attributes["import"])}
	if a := c.Attributes["deployment_group"]; a != nil {
		if names, key, ok := p.ref(a.Expr, "The argument \"deployment_group\"", "deployment_group", 1); ok {
			if key != nil {
				p.errorf(a.Expr.Range().Ptr(), "Invalid reference", "The argument \"deployment_group\" must name a group, without an index.")
			}
			d.Group = names[0]
		}
	}
	p.checkName(b, "deployment")
	p.cfg.Deployments = append(p.cfg.Deployments, d)
}

func (p *parser) deploymentGroup(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "auto_approve_checks"}}})
	p.checkName(b, "deployment group")
	p.cfg.DeploymentGroups = append(p.cfg.DeploymentGroups, &DeploymentGroup{Name: b.Labels[0], DeclRange: b.DefRange,
		AutoApproveChecks: p.refList(c.Attributes["auto_approve_checks"], "deployment_auto_approve")})
}

func (p *parser) autoApprove(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "check"}}})
	aa := &AutoApprove{Name: b.Labels[0], DeclRange: b.DefRange}
	for _, cb := range c.Blocks {
		cc := p.content(cb.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "condition", Required: true}, {Name: "reason", Required: true}}})
		if cc.Attributes["condition"] == nil || cc.Attributes["reason"] == nil {
			continue
		}
		aa.Checks = append(aa.Checks, &Check{Condition: cc.Attributes["condition"].Expr, Reason: cc.Attributes["reason"].Expr, DeclRange: cb.DefRange})
	}
	if len(c.Blocks) == 0 {
		p.errorf(b.DefRange.Ptr(), "Missing check", "The deployment_auto_approve block %q needs at least one check block.", aa.Name)
	}
	p.checkName(b, "deployment_auto_approve")
	p.cfg.AutoApproves = append(p.cfg.AutoApproves, aa)
}

func (p *parser) store(b *hcl.Block) {
	if b.Labels[0] != "varset" {
		p.errorf(b.LabelRanges[0].Ptr(), "Unsupported store type", "The store type %q is not supported; the only store type is \"varset\".", b.Labels[0])
		return
	}
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "id"}, {Name: "name"}, {Name: "category", Required: true}}})
	s := &VarsetStore{Name: b.Labels[1], DeclRange: b.DefRange, ID: p.str(c.Attributes["id"]), VarsetName: p.str(c.Attributes["name"]),
		Category: p.str(c.Attributes["category"])}
	if (c.Attributes["id"] == nil) == (c.Attributes["name"] == nil) {
		p.errorf(b.DefRange.Ptr(), "Invalid varset store", "The store %q needs exactly one of id and name.", s.Name)
	}
	if a := c.Attributes["category"]; a != nil && s.Category != "" && s.Category != "terraform" && s.Category != "env" {
		p.errorf(a.Expr.Range().Ptr(), "Invalid varset store", "The category must be \"terraform\" or \"env\", not %q.", s.Category)
	}
	for _, o := range p.cfg.Stores {
		if o.Name == s.Name {
			p.errorf(b.DefRange.Ptr(), "Duplicate store", "A store named %q is already declared at %s.", s.Name, o.DeclRange)
		}
	}
	p.cfg.Stores = append(p.cfg.Stores, s)
}

func (p *parser) publishOutput(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "value", Required: true}, {Name: "description"}}})
	p.checkName(b, "publish_output")
	p.cfg.PublishOutputs = append(p.cfg.PublishOutputs, &PublishOutput{Name: b.Labels[0], DeclRange: b.DefRange,
		Value: exprOf(c.Attributes["value"]), Description: p.str(c.Attributes["description"])})
}

func (p *parser) upstreamInput(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "type", Required: true}, {Name: "source", Required: true}}})
	u := &UpstreamInput{Name: b.Labels[0], DeclRange: b.DefRange, Type: p.str(c.Attributes["type"]), Source: p.str(c.Attributes["source"])}
	if a := c.Attributes["type"]; a != nil && u.Type != "" && u.Type != "stack" {
		p.errorf(a.Expr.Range().Ptr(), "Invalid upstream input", "The type must be \"stack\", not %q.", u.Type)
	}
	if a := c.Attributes["source"]; a != nil && u.Source != "" && len(strings.Split(u.Source, "/")) != 4 {
		p.errorf(a.Expr.Range().Ptr(), "Invalid upstream input", "The source must be <host>/<organization>/<project>/<stack>, not %q.", u.Source)
	}
	p.checkName(b, "upstream_input")
	p.cfg.UpstreamInputs = append(p.cfg.UpstreamInputs, u)
}

func (p *parser) identityToken(b *hcl.Block) {
	c := p.content(b.Body, &hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "audience", Required: true}}})
	t := &IdentityToken{Name: b.Labels[0], DeclRange: b.DefRange}
	if a := c.Attributes["audience"]; a != nil {
		v, diags := a.Expr.Value(nil)
		ok := !diags.HasErrors() && v.IsKnown() && !v.IsNull() && (v.Type().IsListType() || v.Type().IsTupleType() || v.Type().IsSetType())
		if ok {
			for it := v.ElementIterator(); it.Next(); {
				_, e := it.Element()
				if !e.IsKnown() || e.IsNull() || !e.Type().Equals(cty.String) {
					ok = false
					break
				}
				t.Audience = append(t.Audience, e.AsString())
			}
		}
		if !ok || len(t.Audience) == 0 {
			p.errorf(a.Expr.Range().Ptr(), "Invalid audience", "The audience must be a non-empty list of literal strings.")
		}
	}
	p.checkName(b, "identity_token")
	p.cfg.IdentityTokens = append(p.cfg.IdentityTokens, t)
}

// checkName refuses a label that is not a valid identifier: names end up
// in references, generated Terraform and URLs.
func (p *parser) checkName(b *hcl.Block, what string) {
	for i, l := range b.Labels {
		if !hclsyntax.ValidIdentifier(l) {
			p.errorf(b.LabelRanges[i].Ptr(), "Invalid name", "The %s name %q is not valid: use letters, digits, underscores and dashes, starting with a letter.", what, l)
		}
	}
}
