// Package policy keeps an organization's policies and policy sets (HCP
// Terraform's policy-as-code, with OPA) and evaluates them against a run's
// plan in the run's post-plan task stage.
//
// A policy is a Rego module with a query and an enforcement level
// (advisory or mandatory). A policy set groups policies (or, when
// versioned, the files of an uploaded tarball) and applies globally or to
// workspaces and projects, minus excluded workspaces. Tag selectors (HCP
// Terraform's beta) choose workspaces by their effective tag bindings: an
// inclusion applies a non-global set to every workspace a selector
// matches (the key and its value; a key-only selector only a key-only
// binding, as in HCP Terraform), an exclusion exempts a matching workspace
// from the set, global or not. They are matched against the bindings when
// a run's sets are chosen, so a tag change counts from the next run.
//
// When a run is created on a workspace with policy sets, the run task
// domain (internal/runtask) gives the run a post-plan task stage; once the
// plan is done this package evaluates every set with OPA
// (github.com/open-policy-agent/opa/v1/rego) on HCP Terraform's input
// (plan, run, workspace) and records a policy evaluation with one outcome
// per set. A mandatory failure stops the run, or makes it wait for an
// override when the set is overridable; advisory failures warn. Sentinel policies and sets are kept as objects (go-tfe and
// terraform-provider-tfe create them) but Terrace cannot run Sentinel: their
// evaluation errors with that reason. docs/design/policies.md has the rest.
package policy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// ID prefixes.
const (
	PrefixPolicy     = "pol"
	PrefixSet        = "polset"
	PrefixParameter  = "var"
	PrefixVersion    = "polsetver"
	PrefixEvaluation = "poleval"
	PrefixOutcome    = "psout"
)

// Kind is a policy language.
type Kind string

// Policy kinds. Only OPA is evaluated.
const (
	OPA      Kind = "opa"
	Sentinel Kind = "sentinel"
)

// Level is an enforcement level.
type Level string

// Enforcement levels: OPA knows advisory and mandatory, Sentinel advisory,
// soft-mandatory and hard-mandatory.
const (
	Advisory      Level = "advisory"
	Mandatory     Level = "mandatory"
	SoftMandatory Level = "soft-mandatory"
	HardMandatory Level = "hard-mandatory"
)

func (k Kind) levels() []Level {
	if k == OPA {
		return []Level{Advisory, Mandatory}
	}
	return []Level{Advisory, SoftMandatory, HardMandatory}
}

func (k Kind) ext() string {
	if k == OPA {
		return ".rego"
	}
	return ".sentinel"
}

// MaxPolicyBytes bounds one uploaded policy.
const MaxPolicyBytes = 1 << 20

// Workspaces shows the service the workspaces and projects sets apply to.
type Workspaces interface {
	// Organization returns the organization of a workspace the caller may
	// see, and core.NotFound otherwise.
	Organization(ctx context.Context, workspaceID string) (string, error)
	// ProjectOrganization does the same for a project.
	ProjectOrganization(ctx context.Context, projectID string) (string, error)
	// ProjectOf returns a workspace's project, whoever asks, reading
	// through q (the caller's transaction when it has one).
	ProjectOf(ctx context.Context, q store.Q, workspaceID string) (string, error)
	// Tags returns a workspace's effective tag bindings (its own and
	// those it inherits from its project, as the workspace shows them),
	// whoever asks, reading through q.
	Tags(ctx context.Context, q store.Q, workspaceID string) ([]Tag, error)
}

// Runs shows the service what it evaluates.
type Runs interface {
	// PlanJSON returns a run's plan in terraform's JSON plan format.
	PlanJSON(ctx context.Context, runID string) ([]byte, error)
	// Input returns the run and workspace parts of the OPA input.
	Input(ctx context.Context, runID string) (run, workspace map[string]any, err error)
}

// Options configure a Service.
type Options struct {
	DB         *store.DB
	Workspaces Workspaces
	Runs       Runs
	// Signer makes the upload links of policy set versions.
	Signer *blob.Signer
	// Keys seals parameter values at rest (ValueColumn); nil stores them
	// as given (unit tests).
	Keys   *seal.Keyring
	Logger *slog.Logger
	// MaxVersionBytes bounds what a policy set version's tarball may
	// unpack to. Defaults to 10 MiB.
	MaxVersionBytes int64
}

// Service manages policies, policy sets and policy evaluations.
type Service struct {
	o Options
	// VCS, when wired, connects policy sets to repositories.
	VCS VCS
}

// NewService checks o and returns a Service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Workspaces == nil || o.Runs == nil || o.Signer == nil {
		return nil, errors.New("policy: DB, Workspaces, Runs and Signer are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxVersionBytes <= 0 {
		o.MaxVersionBytes = 10 << 20
	}
	return &Service{o: o}, nil
}

// Policy is one policy.
type Policy struct {
	ID               string
	Organization     string
	Name             string
	Description      string
	Kind             Kind
	Query            string
	EnforcementLevel Level
	EnforcePath      string
	HasContent       bool
	Content          string
	PolicySetCount   int
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// PolicyChanges are the attributes of a create or update; nil is absent.
type PolicyChanges struct {
	Name             *string
	Description      *string
	Kind             *Kind
	Query            *string
	EnforcementLevel *Level
	Enforce          []Enforce
}

// Enforce is the deprecated per-file enforcement of a policy.
type Enforce struct {
	Path *string `json:"path"`
	Mode *Level  `json:"mode"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.\-]*$`)

func checkName(what, name string) error {
	if name == "" {
		return core.Invalid("%s name is required", what)
	}
	if len(name) > 128 || !nameRE.MatchString(name) {
		return core.Invalid("%s name %q may contain only letters, numbers, '-', '_' and '.' (at most 128)", what, name)
	}
	return nil
}

func checkKind(k Kind) error {
	if k != OPA && k != Sentinel {
		return core.Invalid("kind must be opa or sentinel, not %q", k)
	}
	return nil
}

func checkLevel(k Kind, l Level) error {
	for _, v := range k.levels() {
		if v == l {
			return nil
		}
	}
	return core.Invalid("enforcement level %q is not one of %s policies (%v)", l, k, k.levels())
}

const policyCols = `id, organization_name, name, description, kind, query, enforcement_level, enforce_path, has_content, content, created_at, updated_at,
	(SELECT COUNT(*) FROM policy_set_policies sp WHERE sp.policy_id = policies.id)`

func scanPolicy(sc store.Scanner) (*Policy, error) {
	var p Policy
	var created, updated int64
	if err := sc.Scan(&p.ID, &p.Organization, &p.Name, &p.Description, &p.Kind, &p.Query, &p.EnforcementLevel, &p.EnforcePath,
		&p.HasContent, &p.Content, &created, &updated, &p.PolicySetCount); err != nil {
		return nil, err
	}
	p.CreatedAt, p.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &p, nil
}

func readOrg(ctx context.Context, org string) error {
	return authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org})
}

func manageOrg(ctx context.Context, org string) error {
	return authz.Allows(ctx, authz.OrgManagePolicies, authz.Resource{Organization: org})
}

// ListPolicies returns an organization's policies, filtered by a name
// substring and a kind when given.
func (s *Service) ListPolicies(ctx context.Context, org, search string, kind Kind, offset, limit int) ([]*Policy, int, error) {
	if err := readOrg(ctx, org); err != nil {
		return nil, 0, err
	}
	return orgPage(ctx, s.o.DB, "policies", policyCols, scanPolicy, org, search, kind, offset, limit)
}

// orgPage lists at most limit (all when negative) of an organization's
// policies or sets (table), from offset on, by name, with a name
// substring and a kind when given, and says how many match in all.
func orgPage[T any](ctx context.Context, db *store.DB, table, cols string, scan func(store.Scanner) (T, error), org, search string, kind Kind, offset, limit int) ([]T, int, error) {
	where := `organization_name = ?`
	args := []any{org}
	if q := strings.ToLower(search); q != "" {
		where += ` AND LOWER(name) LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike(q)+"%")
	}
	if kind != "" {
		where += ` AND kind = ?`
		args = append(args, string(kind))
	}
	return store.Page(ctx, db, scan, cols, table, where, `name, id`, offset, limit, args...)
}

// resolveEnforcement turns the create/update attributes into a level and
// a path: either enforcement-level or enforce (the deprecated list), not
// both.
func resolveEnforcement(kind Kind, name string, c PolicyChanges, required bool) (Level, string, error) {
	switch {
	case c.EnforcementLevel != nil && len(c.Enforce) > 0:
		return "", "", core.Invalid("give enforcement-level or enforce, not both")
	case c.EnforcementLevel != nil:
		return *c.EnforcementLevel, "", checkLevel(kind, *c.EnforcementLevel)
	case len(c.Enforce) > 0:
		e := c.Enforce[0]
		if len(c.Enforce) > 1 {
			return "", "", core.Invalid("a policy has one file: enforce must have one element")
		}
		if e.Mode == nil {
			return "", "", core.Invalid("enforce[0].mode is required")
		}
		path := ""
		if e.Path != nil {
			path = *e.Path
		}
		return *e.Mode, path, checkLevel(kind, *e.Mode)
	case required:
		return "", "", core.Invalid("enforcement-level (or enforce) is required")
	}
	return "", "", nil
}

// CreatePolicy adds a policy (without content: Upload sets it).
func (s *Service) CreatePolicy(ctx context.Context, org string, c PolicyChanges) (*Policy, error) {
	if err := manageOrg(ctx, org); err != nil {
		return nil, err
	}
	p := &Policy{ID: core.NewID(PrefixPolicy), Organization: org, Kind: Sentinel}
	if c.Name != nil {
		p.Name = *c.Name
	}
	if err := checkName("policy", p.Name); err != nil {
		return nil, err
	}
	if c.Kind != nil && *c.Kind != "" {
		p.Kind = *c.Kind
	}
	if err := checkKind(p.Kind); err != nil {
		return nil, err
	}
	if c.Description != nil {
		p.Description = *c.Description
	}
	if p.Kind == OPA {
		if c.Query == nil || strings.TrimSpace(*c.Query) == "" {
			return nil, core.Invalid("an OPA policy needs a query (such as data.terraform.deny)")
		}
		if err := checkQuery(*c.Query); err != nil {
			return nil, err
		}
		p.Query = *c.Query
	}
	var err error
	if p.EnforcementLevel, _, err = resolveEnforcement(p.Kind, p.Name, c, true); err != nil {
		return nil, err
	}
	p.EnforcePath = p.Name + p.Kind.ext()
	now := core.Now()
	p.CreatedAt, p.UpdatedAt = now, now
	_, err = s.o.DB.Exec(ctx, `INSERT INTO policies (id, organization_name, name, description, kind, query, enforcement_level, enforce_path, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, org, p.Name, p.Description, string(p.Kind), p.Query, string(p.EnforcementLevel), p.EnforcePath, core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.o.DB, err) {
		return nil, core.Invalid("a policy named %q already exists in organization %s", p.Name, org)
	}
	if err != nil {
		return nil, fmt.Errorf("creating policy: %w", err)
	}
	return p, nil
}

func (s *Service) loadPolicy(ctx context.Context, q store.Q, id string) (*Policy, error) {
	p, err := scanPolicy(q.QueryRow(ctx, `SELECT `+policyCols+` FROM policies WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("policy %q not found", id)
	}
	return p, err
}

// Policy returns a policy the caller may see.
func (s *Service) Policy(ctx context.Context, id string) (*Policy, error) {
	p, err := s.loadPolicy(ctx, s.o.DB, id)
	if err != nil {
		return nil, err
	}
	if err := readOrg(ctx, p.Organization); err != nil {
		return nil, core.NotFound("policy %q not found", id)
	}
	return p, nil
}

func (s *Service) managedPolicy(ctx context.Context, id string) (*Policy, error) {
	p, err := s.Policy(ctx, id)
	if err != nil {
		return nil, err
	}
	return p, manageOrg(ctx, p.Organization)
}

// UpdatePolicy changes a policy's description, query (OPA only; ignored
// for Sentinel, as in HCP Terraform) and enforcement. What it does not
// name is kept as the policy has it: the row is read locked, in the
// transaction that writes it back. Before (2026-11-30) it was read with
// no transaction, and an enforcement level changed beside an update of
// the description was written back as it was (on both stores).
func (s *Service) UpdatePolicy(ctx context.Context, id string, c PolicyChanges) (*Policy, error) {
	if _, err := s.managedPolicy(ctx, id); err != nil {
		return nil, err
	}
	var p *Policy
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		// The policy's row is the only one locked here: no order to keep.
		var err error
		p, err = scanPolicy(tx.QueryRow(ctx, `SELECT `+policyCols+` FROM policies WHERE id = ?`+store.ForUpdate(tx), id))
		if store.IsNoRows(err) {
			return core.NotFound("policy %q not found", id)
		}
		if err != nil {
			return err
		}
		if c.Description != nil {
			p.Description = *c.Description
		}
		if c.Query != nil && p.Kind == OPA {
			if err := checkQuery(*c.Query); err != nil {
				return err
			}
			p.Query = *c.Query
		}
		level, _, err := resolveEnforcement(p.Kind, p.Name, c, false)
		if err != nil {
			return err
		}
		if level != "" {
			p.EnforcementLevel = level
		}
		p.UpdatedAt = core.Now()
		if _, err := tx.Exec(ctx, `UPDATE policies SET description = ?, query = ?, enforcement_level = ?, updated_at = ? WHERE id = ?`,
			p.Description, p.Query, string(p.EnforcementLevel), core.Micros(p.UpdatedAt), p.ID); err != nil {
			return fmt.Errorf("updating policy %s: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return p, nil
}

// DeletePolicy removes a policy (and its place in every set).
func (s *Service) DeletePolicy(ctx context.Context, id string) error {
	p, err := s.managedPolicy(ctx, id)
	if err != nil {
		return err
	}
	_, err = s.o.DB.Exec(ctx, `DELETE FROM policies WHERE id = ?`, p.ID)
	return err
}

// Upload sets a policy's source. OPA sources must parse as Rego (v1, or
// the v0 syntax older policies use).
func (s *Service) Upload(ctx context.Context, id string, content []byte) error {
	p, err := s.managedPolicy(ctx, id)
	if err != nil {
		return err
	}
	if p.Kind == OPA && len(strings.TrimSpace(string(content))) > 0 {
		if _, err := parseModule(p.EnforcePath, string(content)); err != nil {
			return err
		}
	}
	_, err = s.o.DB.Exec(ctx, `UPDATE policies SET content = ?, has_content = ?, updated_at = ? WHERE id = ?`,
		string(content), true, core.Micros(core.Now()), p.ID)
	return err
}

// Download returns a policy's source; core.NotFound before an upload.
func (s *Service) Download(ctx context.Context, id string) ([]byte, error) {
	p, err := s.Policy(ctx, id)
	if err != nil {
		return nil, err
	}
	if !p.HasContent {
		return nil, core.NotFound("policy %s has no content yet", id)
	}
	return []byte(p.Content), nil
}
