// Package registry is the organization's private module registry.
//
// A module is created without VCS (name, provider; namespace = the
// organization) and versions are published through the API, or from a
// repository (CreateVCS, vcs.go: the VCS domain fetches each version's
// archive with git and hands it to PublishFromVCS, which checks it as an
// upload). Through the API, creating a
// version returns a capability URL, the PUT to it streams a gzipped tarball
// into the blob store, slug.Unpack proves it safe (no path traversal, no
// links leaving the archive, within size limits) and terraform-config-inspect
// reads its root module (variables, outputs, providers). Only then does the
// version become "ok"; a refused archive leaves a pending version
// "reg_ingress_failed" with the reason, and an "ok" version as it was.
//
// terraform init reaches the versions through the module registry protocol
// (modules.v1): listing versions and a download answering 204 with an
// X-Terraform-Get capability URL ending in .tar.gz, which serves the archive
// without credentials (go-getter sends none).
package registry

import (
	"context"
	"encoding/json"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/vcsrepo"
)

// ID prefixes (HCP Terraform's).
const (
	PrefixModule        = "mod"
	PrefixModuleVersion = "modver"
)

// Registry names.
const (
	RegistryPrivate = "private"
	RegistryPublic  = "public"
)

// ModuleStatus is a module's state (go-tfe's RegistryModuleStatus).
type ModuleStatus string

// Module statuses.
const (
	ModulePending       ModuleStatus = "pending"
	ModuleSetupFailed   ModuleStatus = "setup_failed"
	ModuleSetupComplete ModuleStatus = "setup_complete"
)

// VersionStatus is a version's state (go-tfe's RegistryModuleVersionStatus).
type VersionStatus string

// Version statuses used by API-published modules.
const (
	VersionPending          VersionStatus = "pending"
	VersionRegIngressFailed VersionStatus = "reg_ingress_failed"
	VersionOK               VersionStatus = "ok"
)

// Module is one registry module (one provider of a module name).
type Module struct {
	ID           string
	Organization string
	RegistryName string
	Namespace    string
	Name         string
	Provider     string
	NoCode       bool
	// TestsEnabled: test runs may be made (internal/moduletest);
	// TestsAgentPoolID, when set, is the agent pool whose agents run them
	// (test-config agent-execution-mode "agent"; "" runs them on the
	// server).
	TestsEnabled     bool
	TestsAgentPoolID string
	TagBindings      []TagBinding
	// VCSRepo is the repository a VCS-backed module publishes from (nil:
	// versions are uploaded); VCSStatus is what its first fetch found
	// ("", no_version_tags or setup_failed, with VCSError).
	VCSRepo             *vcsrepo.Repo
	VCSStatus, VCSError string
	CreatedAt           time.Time
	UpdatedAt           time.Time
	// Versions are the module's versions, newest first (Get and List fill it).
	Versions []VersionSummary
}

// VersionSummary is a version's status as the module shows it.
type VersionSummary struct {
	Version string
	Status  VersionStatus
	Error   string
}

// Status derives the module's status from its versions: pending until a
// version is ok (setup_complete), setup_failed when every version failed.
func (m *Module) Status() ModuleStatus {
	if len(m.Versions) == 0 {
		if m.VCSRepo != nil && m.VCSStatus != "" {
			return ModuleStatus(m.VCSStatus)
		}
		return ModulePending
	}
	failed := 0
	for _, v := range m.Versions {
		switch v.Status {
		case VersionOK:
			return ModuleSetupComplete
		case VersionRegIngressFailed, VersionCloneFailed:
			failed++
		}
	}
	if failed == len(m.Versions) {
		return ModuleSetupFailed
	}
	return ModulePending
}

// Version is one published (or to be published) version of a module.
type Version struct {
	ID       string
	ModuleID string
	Version  string
	Status   VersionStatus
	// Error says why the archive was refused (reg_ingress_failed).
	Error string
	// SHA256 and Size describe the stored archive (empty until ok).
	SHA256 string
	Size   int64
	// Inspection is what the archive's root module declares (nil until ok).
	Inspection *Inspection
	// Source is tfe-api for an uploaded version, else the VCS provider
	// it was fetched from, at CommitSHA.
	Source, CommitSHA string
	CreatedAt         time.Time
	UpdatedAt         time.Time

	blobKey string
}

// Inspection is what terraform-config-inspect found in a version's root module.
type Inspection struct {
	Variables []Variable           `json:"variables"`
	Outputs   []Output             `json:"outputs"`
	Providers []ProviderDependency `json:"providers"`
	Resources []Resource           `json:"resources"`
	// Empty is true when the root module declares nothing.
	Empty bool `json:"empty"`
	// Readme is the root module's README (README.md first; at most
	// MaxReadme bytes, valid UTF-8), "" without one. It is kept in its
	// own column (VersionReadme), not with the rest.
	Readme string `json:"-"`
}

// MaxReadme bounds the README a version keeps: a longer one is cut (at a
// character's boundary) with a note saying so.
const MaxReadme = 64 << 10

// Variable is a root module input variable.
type Variable struct {
	Name string `json:"name"`
	// Type is the type constraint as written ("string", "list(string)"),
	// "any" when the variable declares none.
	Type        string `json:"type"`
	Description string `json:"description"`
	// Default is the JSON of the default value; nil when Required.
	Default   json.RawMessage `json:"default,omitempty"`
	Required  bool            `json:"required"`
	Sensitive bool            `json:"sensitive"`
}

// Output is a root module output.
type Output struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Sensitive   bool   `json:"sensitive"`
}

// ProviderDependency is a provider the root module requires.
type ProviderDependency struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Source    string `json:"source"`
	Version   string `json:"version"`
}

// Resource is a managed resource of the root module.
type Resource struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Organizations tells the registry whether an organization exists (the
// caller's access is checked separately). Exists answers a
// core.KindNotFound error when it does not.
type Organizations interface {
	Exists(ctx context.Context, name string) error
}

// NoCodeModules may be wired by the no-code domain: it lists the no-code
// module IDs of registry modules (for the no-code-modules relationship).
type NoCodeModules interface {
	NoCodeModuleIDs(ctx context.Context, moduleIDs []string) (map[string][]string, error)
}

// DeleteHook runs inside the transaction that deletes a module (the no-code
// domain removes its no-code modules there).
type DeleteHook func(ctx context.Context, q store.Q, m *Module) error

// CreateOptions are the attributes of a new module (go-tfe's
// RegistryModuleCreateOptions).
type CreateOptions struct {
	Name         *string `json:"name"`
	Provider     *string `json:"provider"`
	RegistryName *string `json:"registry-name"`
	Namespace    *string `json:"namespace"`
	NoCode       *bool   `json:"no-code"`
	// TestConfig enables the module's tests (internal/moduletest).
	TestConfig *TestConfig `json:"test-config"`
}

// TestConfig is a module's test-config: whether Terrace runs its
// `terraform test` files (test runs from the CLI's `terraform test
// -cloud-run` or the API), and where: on the server (agent-execution-mode
// "remote") or on the agents of a pool ("agent", with agent-pool-id).
type TestConfig struct {
	TestsEnabled       *bool   `json:"tests-enabled"`
	AgentExecutionMode *string `json:"agent-execution-mode"`
	AgentPoolID        *string `json:"agent-pool-id"`
}

// The test-config's execution modes.
const (
	TestsRemote = "remote"
	TestsAgent  = "agent"
)

// testChange is what a test-config changes (nil: left as it is).
type testChange struct {
	enable *bool
	pool   *string // "" runs tests on the server
}

// changes reports whether c changes m.
func (c testChange) changes(m *Module) bool {
	return c.enable != nil && *c.enable != m.TestsEnabled || c.pool != nil && *c.pool != m.TestsAgentPoolID
}

// testConfig checks c against module m (its organization and registry)
// and says what it changes. The pool itself is checked, and kept from
// deletion, in the transaction that writes it (keepTestPool).
func (s *Service) testConfig(c *TestConfig, m *Module) (testChange, error) {
	var tc testChange
	if c == nil {
		return tc, nil
	}
	tc.enable = c.TestsEnabled
	pool := ""
	if c.AgentPoolID != nil {
		pool = *c.AgentPoolID
	}
	mode := ""
	if c.AgentExecutionMode != nil {
		mode = *c.AgentExecutionMode
	}
	switch mode {
	case "":
		if pool != "" {
			return tc, core.Invalid("test-config: agent-pool-id needs agent-execution-mode %q", TestsAgent)
		}
	case TestsRemote:
		if pool != "" {
			return tc, core.Invalid("test-config: agent-execution-mode %q runs tests on the server and takes no agent-pool-id", TestsRemote)
		}
		tc.pool = &pool
	case TestsAgent:
		if pool == "" {
			return tc, core.Invalid("test-config: agent-execution-mode %q needs the agent-pool-id of the pool whose agents run the tests", TestsAgent)
		}
		if s.Pools == nil {
			return tc, core.Invalid("test-config: this server has no agent pools to run module tests on")
		}
		tc.pool = &pool
	default:
		return tc, core.Invalid("test-config: agent-execution-mode must be %q or %q, not %q", TestsRemote, TestsAgent, mode)
	}
	if m.RegistryName != RegistryPrivate && (tc.enable != nil && *tc.enable || pool != "") {
		return tc, core.Invalid("test-config: only private modules run tests")
	}
	return tc, nil
}

// keepTestPool checks, inside q's transaction, that the pool m's tests
// run on is its organization's, and keeps it from being deleted until the
// transaction ends.
func (s *Service) keepTestPool(ctx context.Context, q store.Q, m *Module) error {
	if m.TestsAgentPoolID == "" {
		return nil
	}
	return s.Pools.KeepPool(ctx, q, m.Organization, m.TestsAgentPoolID)
}

// UsingPool counts the modules whose tests run on agent pool id (an agent
// pool in use is not deleted).
func UsingPool(ctx context.Context, q store.Q, id string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM registry_modules WHERE tests_agent_pool_id = ?`, id).Scan(&n)
	return n, err
}

// TagBinding is a key/value tag on a module.
type TagBinding struct {
	ID    string `json:"id"`
	Key   string `json:"key"`
	Value string `json:"value"`
}

// UpdateOptions are the updatable attributes of a module.
type UpdateOptions struct {
	NoCode *bool `json:"no-code"`
	// TestConfig enables or disables the module's tests.
	TestConfig *TestConfig `json:"test-config"`
	// VCSRepo changes a VCS-backed module's publishing (branch, tags,
	// source-directory, tag-prefix).
	VCSRepo json.RawMessage `json:"vcs-repo"`
	// TagBindings, when not nil, replaces the module's tag bindings.
	TagBindings *[]TagBinding `json:"-"`
}
