package organization

import (
	"context"
	"encoding/json"
	"fmt"
	"net/mail"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// CreateHook runs inside the transaction that creates an organization (the
// default project, the owners team).
type CreateHook func(ctx context.Context, q store.Q, org *Organization, creator *auth.Principal) error

// Service manages organizations.
type Service struct {
	db    *store.DB
	hooks []CreateHook
	// OnDelete runs inside the transaction that deletes an organization,
	// before its row goes (and with it, by cascade, the rows of all it
	// holds), so that other domains record for deletion what the cascade
	// cannot reach: their blobs.
	OnDelete []func(ctx context.Context, q store.Q, org string) error
	// OnRename runs inside the transaction that renames an organization,
	// after its row (and, by cascade, every organization_name that refers
	// to it) has the new name, for what names the organization in other
	// columns: the namespace of its private registry modules and
	// providers.
	OnRename []func(ctx context.Context, q store.Q, from, to string) error
	// OnEnable runs after a site admin enabled a disabled organization
	// again (SetDisabled), for what waited meanwhile: its queued runs.
	OnEnable []func(ctx context.Context, org string)
	// Pools checks and keeps the default agent pool (nil: no agent
	// pools).
	Pools interface {
		// KeepPool keeps pool id of organization org from being deleted
		// until q's transaction ends (core.Invalid when org has no such
		// pool, or has it no more).
		KeepPool(ctx context.Context, q store.Q, org, id string) error
	}
}

// applyPool validates and applies the default agent pool after the other
// settings: a pool belongs to the organization (name, as it was before
// this update renames it) and goes with agent execution only; leaving
// agent mode drops it. In q, the update's transaction, the pool is kept
// from being deleted before q commits (agent.Service.Delete asks UsesPool
// after locking it).
func (s *Service) applyPool(ctx context.Context, q store.Q, name string, org *Organization, o UpdateOptions) error {
	st := &org.Settings
	if o.DefaultAgentPoolID != nil {
		id := *o.DefaultAgentPoolID
		if id != "" {
			if s.Pools == nil {
				return core.Invalid("agent pool %q not found", id)
			}
			if err := s.Pools.KeepPool(ctx, q, name, id); err != nil {
				return err
			}
			if st.DefaultExecutionMode != "agent" {
				return core.Invalid("default agent pool must not be specified unless using 'agent' execution mode")
			}
		}
		st.DefaultAgentPoolID = id
	}
	if st.DefaultExecutionMode != "agent" {
		st.DefaultAgentPoolID = ""
	}
	return nil
}

// NewService returns an organization service; hooks run on every create.
func NewService(db *store.DB, hooks ...CreateHook) *Service {
	return &Service{db: db, hooks: hooks}
}

// CreateOptions are the attributes of a new organization.
type CreateOptions struct {
	Name  string
	Email string
	// Update carries any settings given at creation.
	Update UpdateOptions
}

// UpdateOptions are changes to an organization; nil fields are unchanged.
type UpdateOptions struct {
	Name                       *string `json:"name"`
	Email                      *string `json:"email"`
	CollaboratorAuthPolicy     *string `json:"collaborator-auth-policy"`
	CostEstimationEnabled      *bool   `json:"cost-estimation-enabled"`
	DefaultExecutionMode       *string `json:"default-execution-mode"`
	SessionRemember            *int    `json:"session-remember"`
	SessionTimeout             *int    `json:"session-timeout"`
	AssessmentsEnforced        *bool   `json:"assessments-enforced"`
	StacksEnabled              *bool   `json:"stacks-enabled"`
	AllowForceDeleteWorkspaces *bool   `json:"allow-force-delete-workspaces"`
	SendPassingStatuses        *bool   `json:"send-passing-statuses-for-untriggered-speculative-plans"`
	AggregatedCommitStatus     *bool   `json:"aggregated-commit-status-enabled"`
	SpeculativePlanManagement  *bool   `json:"speculative-plan-management-enabled"`
	OwnersTeamSAMLRoleID       *string `json:"owners-team-saml-role-id"`
	UserTokensEnabled          *bool   `json:"user-tokens-enabled"`
	// DefaultAgentPoolID comes from the default-agent-pool relationship
	// ("" clears it).
	DefaultAgentPoolID *string `json:"-"`
}

func (o UpdateOptions) apply(org *Organization) error {
	if o.Name != nil {
		if err := ValidateName(*o.Name); err != nil {
			return err
		}
		org.Name = *o.Name
	}
	if o.Email != nil {
		if _, err := mail.ParseAddress(*o.Email); err != nil {
			return core.Invalid("email %q is not a valid address", *o.Email)
		}
		org.Email = *o.Email
	}
	s := &org.Settings
	if o.CollaboratorAuthPolicy != nil {
		if *o.CollaboratorAuthPolicy != "password" && *o.CollaboratorAuthPolicy != "two_factor_mandatory" {
			return core.Invalid("collaborator-auth-policy must be \"password\" or \"two_factor_mandatory\"")
		}
		s.CollaboratorAuthPolicy = *o.CollaboratorAuthPolicy
	}
	if o.DefaultExecutionMode != nil {
		if !ValidExecutionMode(*o.DefaultExecutionMode) {
			return core.Invalid("default-execution-mode must be one of remote, local, agent")
		}
		s.DefaultExecutionMode = *o.DefaultExecutionMode
	}
	setb := func(dst *bool, v *bool) {
		if v != nil {
			*dst = *v
		}
	}
	setb(&s.CostEstimationEnabled, o.CostEstimationEnabled)
	setb(&s.AssessmentsEnforced, o.AssessmentsEnforced)
	setb(&s.StacksEnabled, o.StacksEnabled)
	setb(&s.AllowForceDeleteWorkspaces, o.AllowForceDeleteWorkspaces)
	setb(&s.SendPassingStatuses, o.SendPassingStatuses)
	setb(&s.AggregatedCommitStatus, o.AggregatedCommitStatus)
	setb(&s.SpeculativePlanManagement, o.SpeculativePlanManagement)
	if s.SendPassingStatuses && s.AggregatedCommitStatus {
		return core.Invalid("send-passing-statuses-for-untriggered-speculative-plans and aggregated-commit-status-enabled cannot both be true")
	}
	for _, m := range []struct {
		name string
		v    *int
		dst  *int
	}{{"session-remember", o.SessionRemember, &s.SessionRemember}, {"session-timeout", o.SessionTimeout, &s.SessionTimeout}} {
		if m.v == nil {
			continue
		}
		if *m.v < 1 {
			return core.Invalid("%s is a number of minutes, at least 1: %d is not", m.name, *m.v)
		}
		*m.dst = *m.v
	}
	if o.OwnersTeamSAMLRoleID != nil {
		s.OwnersTeamSAMLRoleID = *o.OwnersTeamSAMLRoleID
	}
	if o.UserTokensEnabled != nil {
		v := *o.UserTokensEnabled
		s.UserTokensEnabled = &v
	}
	return nil
}

// Create makes an organization, as the model's OrgCreate allows (user
// tokens; only site admins' when the site limits organization creation);
// the creating user becomes an owner.
func (s *Service) Create(ctx context.Context, opts CreateOptions) (*Organization, error) {
	p := auth.FromContext(ctx)
	if err := authz.Allows(ctx, authz.OrgCreate, authz.Resource{}); err != nil {
		return nil, err
	}
	if opts.Name == "" {
		return nil, core.Invalid("name is required")
	}
	if opts.Email == "" {
		return nil, core.Invalid("email is required")
	}
	now := core.Now()
	org := &Organization{ID: core.NewID(core.PrefixOrganization), Settings: defaultSettings(), CreatedAt: now, UpdatedAt: now}
	opts.Update.Name, opts.Update.Email = &opts.Name, &opts.Email
	if err := opts.Update.apply(org); err != nil {
		return nil, err
	}
	if opts.Update.DefaultAgentPoolID != nil && *opts.Update.DefaultAgentPoolID != "" {
		return nil, core.Invalid("a new organization has no agent pools yet: set the default agent pool with an update")
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		settings, _ := json.Marshal(org.Settings)
		_, err := tx.Exec(ctx, `INSERT INTO organizations (id, name, email, attrs, user_tokens_enabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			org.ID, org.Name, org.Email, string(settings), org.Settings.userTokens(), core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", org.Name)
		}
		if err != nil {
			return err
		}
		for _, h := range s.hooks {
			if err := h(ctx, tx, org, p); err != nil {
				return fmt.Errorf("setting up organization %s: %w", org.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return org, nil
}

const cols = `id, name, email, attrs, is_disabled, created_at, updated_at, global_module_sharing, global_provider_sharing, workspace_limit, plan_timeout, apply_timeout, access_beta_tools, worker_sudo`

func scan(sc interface{ Scan(...any) error }) (*Organization, error) {
	var o Organization
	var attrs string
	var created, updated int64
	if err := sc.Scan(&o.ID, &o.Name, &o.Email, &attrs, &o.Disabled, &created, &updated, &o.GlobalModuleSharing, &o.GlobalProviderSharing, &o.WorkspaceLimit,
		&o.PlanTimeout, &o.ApplyTimeout, &o.AccessBetaTools, &o.WorkerSudo); err != nil {
		return nil, err
	}
	o.Settings = defaultSettings()
	if err := json.Unmarshal([]byte(attrs), &o.Settings); err != nil {
		return nil, fmt.Errorf("decoding settings of organization %s: %w", o.Name, err)
	}
	o.CreatedAt, o.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &o, nil
}

func (s *Service) get(ctx context.Context, q store.Q, name string, lock bool) (*Organization, error) {
	query := `SELECT ` + cols + ` FROM organizations WHERE name = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	o, err := scan(q.QueryRow(ctx, query, name))
	if store.IsNoRows(err) {
		return nil, core.NotFound("organization %q not found", name)
	}
	return o, err
}

// Get returns an organization the caller may see.
func (s *Service) Get(ctx context.Context, name string) (*Organization, error) {
	if err := auth.CheckOrganization(ctx, name); err != nil {
		return nil, err
	}
	return s.get(ctx, s.db, name, false)
}

// SystemIn returns an organization without checking the caller, reading
// through q (inside a transaction, its Tx): for the organization of
// something already read (a project's defaults).
func (s *Service) SystemIn(ctx context.Context, q store.Q, name string) (*Organization, error) {
	return s.get(ctx, q, name, false)
}

// NameByID returns an organization's name (for organization tokens).
func (s *Service) NameByID(ctx context.Context, id string) (string, error) {
	var name string
	err := s.db.QueryRow(ctx, `SELECT name FROM organizations WHERE id = ?`, id).Scan(&name)
	if store.IsNoRows(err) {
		return "", core.NotFound("organization %s not found", id)
	}
	return name, err
}

// IDByName returns an organization's ID without checking the caller (for
// the audit trail, which names organizations by ID).
func (s *Service) IDByName(ctx context.Context, name string) (string, error) {
	var id string
	err := s.db.QueryRow(ctx, `SELECT id FROM organizations WHERE name = ?`, name).Scan(&id)
	if store.IsNoRows(err) {
		return "", core.NotFound("organization %q not found", name)
	}
	return id, err
}

// List returns the organizations the caller may access whose name or
// email contains query, by name.
func (s *Service) List(ctx context.Context, query string) ([]*Organization, error) {
	orgs, _, err := s.ListPage(ctx, query, 0, -1)
	return orgs, err
}

// ListPage returns at most limit (all when negative) of the organizations
// List returns, from offset on, and how many in all: the caller's reach
// and the query are conditions in the store.
func (s *Service) ListPage(ctx context.Context, query string, offset, limit int) ([]*Organization, int, error) {
	all, names := auth.FromContext(ctx).Organizations()
	if !all && len(names) == 0 {
		return []*Organization{}, 0, nil
	}
	where := `1 = 1`
	var args []any
	if !all {
		var in string
		in, args = store.In(names)
		where = `name IN (` + in + `)`
	}
	if q := strings.ToLower(query); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		where += ` AND (LOWER(name) LIKE ?` + store.LikeEscape + ` OR LOWER(email) LIKE ?` + store.LikeEscape + `)`
		args = append(args, pattern, pattern)
	}
	return store.Page(ctx, s.db, scan, cols, "organizations", where, `name`, offset, limit, args...)
}

// Update changes an organization: OrgManage, decided before the
// transaction (the model reads the store).
func (s *Service) Update(ctx context.Context, name string, opts UpdateOptions) (*Organization, error) {
	if err := auth.CheckOrganization(ctx, name); err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: name}); err != nil {
		return nil, err
	}
	var org *Organization
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		org, err = s.get(ctx, tx, name, true)
		if err != nil {
			return err
		}
		if err := opts.apply(org); err != nil {
			return err
		}
		if err := s.applyPool(ctx, tx, name, org, opts); err != nil {
			return err
		}
		org.UpdatedAt = core.Now()
		settings, _ := json.Marshal(org.Settings)
		_, err = tx.Exec(ctx, `UPDATE organizations SET name = ?, email = ?, attrs = ?, user_tokens_enabled = ?, updated_at = ? WHERE id = ?`,
			org.Name, org.Email, string(settings), org.Settings.userTokens(), core.Micros(org.UpdatedAt), org.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", org.Name)
		}
		if err != nil || org.Name == name {
			return err
		}
		for _, fn := range s.OnRename {
			if err := fn(ctx, tx, name, org.Name); err != nil {
				return fmt.Errorf("renaming organization %s: %w", name, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return org, nil
}

// Delete removes an organization and everything in it: OrgManage (owners,
// not the organization's token), decided before the transaction.
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := auth.CheckOrganization(ctx, name); err != nil {
		return err
	}
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: name}); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM organizations WHERE name = ?`+store.ForUpdate(tx), name).Scan(&id); store.IsNoRows(err) {
			return core.NotFound("organization %q not found", name)
		} else if err != nil {
			return err
		}
		for _, fn := range s.OnDelete {
			if err := fn(ctx, tx, name); err != nil {
				return fmt.Errorf("deleting organization %s: %w", name, err)
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM organizations WHERE id = ?`, id); err != nil {
			return fmt.Errorf("deleting organization %s: %w", name, err)
		}
		return nil
	})
}

// UserTokensDisabled returns those of the named organizations whose
// user-tokens-enabled setting is false.
func (s *Service) UserTokensDisabled(ctx context.Context, names []string) ([]string, error) {
	disabled, err := store.Strings(ctx, s.db, `SELECT name FROM organizations WHERE user_tokens_enabled = ?`, false)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range disabled {
		if slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// DisabledOrganizations returns those of the named organizations that a
// site admin has disabled (for the principals of internal/auth).
func (s *Service) DisabledOrganizations(ctx context.Context, names []string) ([]string, error) {
	if len(names) == 0 {
		return nil, nil
	}
	in, args := store.In(names)
	out, err := store.Strings(ctx, s.db, `SELECT name FROM organizations WHERE is_disabled = ? AND name IN (`+in+`) ORDER BY name`, append([]any{true}, args...)...)
	if len(out) == 0 {
		out = nil
	}
	return out, err
}

// DisabledOrganizationsSQL says in SQL what DisabledOrganizations
// answers, for the one query that authenticates a request.
func (s *Service) DisabledOrganizationsSQL() string {
	return `SELECT name FROM organizations WHERE is_disabled = TRUE`
}

// OrganizationIDsSQL says in SQL what NameByID answers, for the one query
// that authenticates an organization token.
func (s *Service) OrganizationIDsSQL() string {
	return `SELECT id, name FROM organizations`
}

// UserTokensDisabledSQL says in SQL what UserTokensDisabled answers, for
// the one query that authenticates a request (internal/auth).
func (s *Service) UserTokensDisabledSQL() string {
	return `SELECT name FROM organizations WHERE user_tokens_enabled = FALSE`
}

// UsesPool reports whether organization org's default agent pool is
// poolID.
func UsesPool(ctx context.Context, q store.Q, org, poolID string) (bool, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM organizations WHERE name = ? AND attrs LIKE ?`+store.LikeEscape,
		org, store.LikeJSONString("default-agent-pool-id", poolID)).Scan(&n)
	return n > 0, err
}
