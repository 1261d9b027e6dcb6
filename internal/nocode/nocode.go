// Package nocode is no-code provisioning: a registry module enabled for
// no-code use (one no-code module per registry module) pinned to one of its
// published versions, with optional variable options (the allowed values
// of a variable); workspaces created from it; and upgrades of those
// workspaces to the module's new pin.
//
// Configuration. A no-code module must use the standard root module
// structure and declare its providers itself, so the pinned version's
// archive is uploaded as the workspace's configuration as it is (no
// generated wrapper): the module's variables are set as workspace
// variables and its outputs are the workspace's outputs.
//
// Upgrade. Initiating an upgrade uploads the new pin's archive as a
// speculative configuration version and queues a plan-only run with the
// changed variables as run variables, so that the workspace is untouched
// until confirmation; its status is the run's status (planned_and_finished
// when the plan is done). Confirming sets the changed variables on the
// workspace, uploads the archive as the workspace's configuration and
// queues an auto-applied run; the workspace then counts as provisioned at
// the new version.
package nocode

import (
	"time"
)

// ID prefixes (HCP Terraform's).
const (
	PrefixModule         = "nocode"
	PrefixVariableOption = "ncvaropt"
)

// Module is a no-code module.
type Module struct {
	ID               string
	Organization     string
	RegistryModuleID string
	Enabled          bool
	VersionPin       string
	VariableOptions  []VariableOption
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// VariableOption lists the values allowed for one variable.
type VariableOption struct {
	ID           string
	VariableName string
	VariableType string
	Options      []string
}

// VariableOptionInput is a variable option as given (ID keeps an existing
// option set's identity).
type VariableOptionInput struct {
	ID           string
	VariableName string
	VariableType string
	Options      []string
}

// CreateOptions create a no-code module.
type CreateOptions struct {
	RegistryModuleID string
	Enabled          *bool
	VersionPin       string
	VariableOptions  []VariableOptionInput
}

// UpdateOptions change a no-code module; nil fields are unchanged and a
// non-nil VariableOptions replaces the whole set.
type UpdateOptions struct {
	RegistryModuleID string
	Enabled          *bool
	VersionPin       *string
	VariableOptions  *[]VariableOptionInput
}

// Var is a variable given when creating or upgrading a workspace.
type Var struct {
	Key         string `json:"key"`
	Value       string `json:"value"`
	Description string `json:"description,omitempty"`
	Category    string `json:"category"`
	HCL         bool   `json:"hcl"`
	Sensitive   bool   `json:"sensitive"`
}

// WorkspaceOptions create a workspace from a no-code module.
type WorkspaceOptions struct {
	Name             string
	Description      *string
	AutoApply        *bool
	ExecutionMode    *string
	AgentPoolID      *string
	SourceName       *string
	SourceURL        *string
	TerraformVersion *string
	ProjectID        string
	Vars             []Var
}

// Upgrade is an initiated workspace upgrade.
type Upgrade struct {
	RunID         string
	WorkspaceID   string
	NoCodeModule  string
	ModuleVersion string
	Status        string
	PlanURL       string
	Message       string
}
