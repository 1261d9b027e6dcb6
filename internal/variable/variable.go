// Package variable keeps workspace variables and variable sets, and computes
// the variables a run receives (EffectiveVariables).
//
// Values are secrets in waiting: sensitive values are write-only at the API
// (every response shows them as null) and no value, sensitive or not, is
// ever written to a log. Only EffectiveVariables, for the runner, returns
// sensitive values.
package variable

import (
	"context"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/terracehq/terrace/internal/core"
)

// Category is what a variable becomes in a run.
type Category string

// Categories. policy-set parameters belong to policy sets, not here.
const (
	CategoryTerraform Category = "terraform"
	CategoryEnv       Category = "env"
)

// MaxDescription is the longest description accepted (HCP Terraform's limit).
const MaxDescription = 512

// Variable is a workspace variable or a variable-set variable.
type Variable struct {
	ID           string
	Organization string
	// Exactly one of WorkspaceID and VarsetID is set.
	WorkspaceID string
	VarsetID    string
	Key         string
	// Value is the stored value. Sensitive values must not leave the
	// service except through EffectiveVariables.
	Value       string
	Description string
	Category    Category
	HCL         bool
	Sensitive   bool
	// VersionID changes on every update.
	VersionID string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Redacted returns a copy safe to show a caller: a sensitive value is blanked.
func (v *Variable) Redacted() *Variable {
	c := *v
	if c.Sensitive {
		c.Value = ""
	}
	return &c
}

// VariableSet is a named group of variables applied to workspaces,
// projects, or (global) the whole organization.
type VariableSet struct {
	ID           string
	Organization string
	Name         string
	Description  string
	Global       bool
	// Priority sets override values from more specific scopes, workspace
	// variables included.
	Priority bool
	// ParentProjectID is set for a project-owned set.
	ParentProjectID string
	WorkspaceIDs    []string
	ProjectIDs      []string
	VarIDs          []string
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Workspace is what this package needs to know about a workspace.
type Workspace struct {
	ID, Name, Organization, ProjectID string
}

// Workspaces looks up workspaces for the caller in ctx. Get is
// access-checked: a workspace the caller cannot see is core.NotFound.
type Workspaces interface {
	Get(ctx context.Context, id string) (*Workspace, error)
}

// WorkspaceProjectSQL is implemented by a Workspaces that says in SQL the
// project of the workspace whose ID is the SQL expression idExpr (a scalar
// subquery): the variable set reads use it to find the sets applied to the
// workspaces of a project whose variables the caller may read. Without it
// those sets are readable only through the caller's other reach.
type WorkspaceProjectSQL interface {
	WorkspaceProjectSQL(idExpr string) string
}

// Projects looks up a project's organization; a missing project (or one
// the caller in ctx cannot see) is core.NotFound. The variable service
// checks the organization itself as well.
type Projects interface {
	Get(ctx context.Context, id string) (org string, err error)
}

// VarOptions are the attributes of a variable as sent by a client; nil
// fields are absent.
type VarOptions struct {
	Key         *string   `json:"key"`
	Value       *string   `json:"value"`
	Description *string   `json:"description"`
	Category    *Category `json:"category"`
	HCL         *bool     `json:"hcl"`
	Sensitive   *bool     `json:"sensitive"`
}

// apply validates opts and applies them to v. create says whether v is new
// (then key and category are required).
func (o VarOptions) apply(v *Variable, create bool) error {
	if create {
		if o.Key == nil || *o.Key == "" {
			return core.Invalid("key is required")
		}
		if o.Category == nil || *o.Category == "" {
			return core.Invalid("category is required")
		}
	}
	if o.Key != nil {
		v.Key = *o.Key
	}
	if o.Category != nil {
		c := *o.Category
		if c != CategoryTerraform && c != CategoryEnv {
			return core.Invalid("category must be \"terraform\" or \"env\", not %q", string(c))
		}
		v.Category = c
	}
	if err := ValidateKey(v.Key, v.Category); err != nil {
		return err
	}
	if o.Value != nil {
		v.Value = *o.Value
	}
	if o.Description != nil {
		if len(*o.Description) > MaxDescription {
			return core.Invalid("description is too long (maximum is %d characters)", MaxDescription)
		}
		v.Description = *o.Description
	}
	if o.HCL != nil {
		v.HCL = *o.HCL
	}
	if o.Sensitive != nil {
		if v.Sensitive && !*o.Sensitive {
			return core.Invalid("a sensitive variable cannot be made non-sensitive: delete and recreate it")
		}
		v.Sensitive = *o.Sensitive
	}
	return nil
}

// keyRE is what a terraform variable key may contain: the characters of an
// HCL identifier. A leading digit is accepted because HCP Terraform accepts
// it (go-tfe's tests use UUIDs as keys).
var keyRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_-]*$`)

// ValidateKey checks a key for its category: a terraform variable needs an
// identifier-like name; an environment variable name must be non-empty and
// contain no '=', whitespace or control character (no shell, and no
// program reading its environment, can use such a name; the run would
// carry it unused).
func ValidateKey(key string, c Category) error {
	if key == "" {
		return core.Invalid("key is required")
	}
	if len(key) > 128 {
		return core.Invalid("key is too long (maximum is 128 characters)")
	}
	switch c {
	case CategoryTerraform:
		if !keyRE.MatchString(key) {
			return core.Invalid("key %q is invalid: a terraform variable name may contain only letters, digits, '_' and '-'", key)
		}
	case CategoryEnv:
		if strings.ContainsFunc(key, func(r rune) bool { return r == '=' || unicode.IsSpace(r) || unicode.IsControl(r) }) {
			return core.Invalid("key %q is invalid: an environment variable name cannot contain '=', spaces or control characters", key)
		}
	}
	return nil
}

// VarsetOptions are the attributes of a variable set as sent by a client.
type VarsetOptions struct {
	Name        *string `json:"name"`
	Description *string `json:"description"`
	Global      *bool   `json:"global"`
	Priority    *bool   `json:"priority"`
}

func (o VarsetOptions) apply(vs *VariableSet, create bool) error {
	if create && (o.Name == nil || strings.TrimSpace(*o.Name) == "") {
		return core.Invalid("name is required")
	}
	if o.Name != nil {
		n := strings.TrimSpace(*o.Name)
		if n == "" {
			return core.Invalid("name cannot be blank")
		}
		if len(n) > 128 {
			return core.Invalid("name is too long (maximum is 128 characters)")
		}
		vs.Name = n
	}
	if o.Description != nil {
		if len(*o.Description) > MaxDescription {
			return core.Invalid("description is too long (maximum is %d characters)", MaxDescription)
		}
		vs.Description = *o.Description
	}
	if o.Global != nil {
		vs.Global = *o.Global
	}
	if o.Priority != nil {
		vs.Priority = *o.Priority
	}
	return nil
}
