package stack

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/zclconf/go-cty/cty"
)

// File suffixes of a stack's configuration.
const (
	ComponentSuffix = ".tfcomponent.hcl"
	DeploySuffix    = ".tfdeploy.hcl"
	// BetaSuffix is the beta name of component files, no longer supported.
	BetaSuffix = ".tfstack.hcl"
)

// Limits of one stack.
const (
	MaxDeployments = 20
	MaxUpstreams   = 20
)

// Config is a stack's parsed configuration: the component files and the
// deployment files of one configuration version. Expressions are kept
// unevaluated; they are evaluated per deployment when a run plans.
// Every slice is in declaration order (files in name order).
type Config struct {
	Components        []*Component
	Stacks            []*EmbeddedStack
	Providers         []*Provider
	RequiredProviders map[string]*RequiredProvider
	Variables         []*Variable
	Outputs           []*Output
	Locals            []*Local
	Removed           []*Removed

	Deployments      []*Deployment
	DeploymentGroups []*DeploymentGroup
	AutoApproves     []*AutoApprove
	Stores           []*VarsetStore
	PublishOutputs   []*PublishOutput
	UpstreamInputs   []*UpstreamInput
	IdentityTokens   []*IdentityToken
	DeployLocals     []*Local

	// Upstream holds the values the stacks named by UpstreamInputs
	// publish (input name → object of outputs), set by the service
	// before Compile; deployments' inputs read them as
	// upstream_input.<name>.<output>.
	Upstream map[string]cty.Value
	// StoreValues holds the variables the store "varset" blocks read
	// (store name → object of values, see storeValues), set by the
	// service before Compile.
	StoreValues map[string]cty.Value
	// Imports holds the import blocks lifted out of the components'
	// modules (liftImports), written into the root module of a deployment
	// with import = true.
	Imports []*ImportBlock

	// Sources holds the files read (name → content), for snippets of
	// diagnostics found later.
	Sources map[string][]byte
}

// Component is a `component "<name>"` block: one module instantiated with
// inputs and providers, possibly for each element of a collection.
type Component struct {
	Name      string
	Source    string
	Version   string // registry sources only
	Inputs    hcl.Expression
	Providers []*ProviderRef
	DependsOn []string // component names
	ForEach   hcl.Expression
	// Needs lists the components this one reads from or depends on,
	// sorted and without duplicates.
	Needs     []string
	DeclRange hcl.Range
}

// ProviderRef is one entry of a component's providers map:
// `<LocalName> = provider.<Type>.<Alias>[Key]`.
type ProviderRef struct {
	LocalName string
	Type      string
	Alias     string
	Key       hcl.Expression // nil when the provider has no for_each
	Range     hcl.Range
}

// EmbeddedStack is a `stack "<name>"` block: a component configuration
// published in the private registry.
type EmbeddedStack struct {
	Name      string
	Source    string
	Version   string
	Inputs    hcl.Expression
	DeclRange hcl.Range
}

// Provider is a `provider "<type>" "<alias>"` block.
type Provider struct {
	Type      string
	Alias     string
	ForEach   hcl.Expression
	Config    hcl.Body // the config block's body; nil when absent
	DeclRange hcl.Range
}

// BuiltinTerraform is the source of the provider built into Terraform
// (terraform_data); it needs no version.
const BuiltinTerraform = "terraform.io/builtin/terraform"

// RequiredProvider is one entry of required_providers.
type RequiredProvider struct {
	Name    string
	Source  string
	Version string
	Range   hcl.Range
}

// Variable is a `variable "<name>"` block of the component configuration.
type Variable struct {
	Name         string
	Type         cty.Type
	TypeDefaults *typeexpr.Defaults
	Default      cty.Value // meaningful when HasDefault
	HasDefault   bool
	Description  string
	Sensitive    bool
	Nullable     bool
	Ephemeral    bool
	DeclRange    hcl.Range
}

// Output is an `output "<name>"` block of the component configuration.
type Output struct {
	Name        string
	Type        cty.Type
	Value       hcl.Expression
	Description string
	Sensitive   bool
	Ephemeral   bool
	DeclRange   hcl.Range
}

// Local is one attribute of a locals block.
type Local struct {
	Name  string
	Expr  hcl.Expression
	Range hcl.Range
}

// Removed is a `removed` block: the component instances it names are
// destroyed with the providers it lists.
type Removed struct {
	Source    string
	From      string // component name
	FromKey   hcl.Expression
	Providers []*ProviderRef
	ForEach   hcl.Expression
	DeclRange hcl.Range
}

// Deployment is a `deployment "<name>"` block of a deployment file.
type Deployment struct {
	Name      string
	Inputs    hcl.Expression
	Group     string // deployment_group name; "<name>_default" when not set
	Destroy   bool
	Import    bool
	DeclRange hcl.Range
}

// DefaultGroup names the group of a deployment declared without one.
func DefaultGroup(deployment string) string { return deployment + "_default" }

// DeploymentGroup is a `deployment_group "<name>"` block, or a default
// group made for a deployment without one (Implicit).
type DeploymentGroup struct {
	Name              string
	AutoApproveChecks []string // deployment_auto_approve names
	Implicit          bool
	DeclRange         hcl.Range
}

// AutoApprove is a `deployment_auto_approve "<name>"` block.
type AutoApprove struct {
	Name      string
	Checks    []*Check
	DeclRange hcl.Range
}

// Check is one check of a deployment_auto_approve block.
type Check struct {
	Condition hcl.Expression
	Reason    hcl.Expression
	DeclRange hcl.Range
}

// VarsetStore is a `store "varset" "<name>"` block.
type VarsetStore struct {
	Name       string
	ID         string
	VarsetName string
	Category   string // "terraform" or "env"
	DeclRange  hcl.Range
}

// PublishOutput is a `publish_output "<name>"` block.
type PublishOutput struct {
	Name        string
	Value       hcl.Expression
	Description string
	DeclRange   hcl.Range
}

// UpstreamInput is an `upstream_input "<name>"` block.
type UpstreamInput struct {
	Name      string
	Type      string // "stack"
	Source    string // "<host>/<org>/<project>/<stack>"
	DeclRange hcl.Range
}

// IdentityToken is an `identity_token "<name>"` block.
type IdentityToken struct {
	Name      string
	Audience  []string
	DeclRange hcl.Range
}

// Component returns the named component, or nil.
func (c *Config) Component(name string) *Component {
	for _, x := range c.Components {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Deployment returns the named deployment, or nil.
func (c *Config) Deployment(name string) *Deployment {
	for _, x := range c.Deployments {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// Group returns the named deployment group, or nil.
func (c *Config) Group(name string) *DeploymentGroup {
	for _, x := range c.DeploymentGroups {
		if x.Name == name {
			return x
		}
	}
	return nil
}

// AutoApproveRule returns the named deployment_auto_approve block, or nil.
func (c *Config) AutoApproveRule(name string) *AutoApprove {
	for _, x := range c.AutoApproves {
		if x.Name == name {
			return x
		}
	}
	return nil
}
