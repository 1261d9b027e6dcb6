package organization

import (
	"context"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/sitesettings"
	"github.com/terracehq/terrace/internal/store"
)

// Module sharing (Terraform Enterprise's): a site admin lets other
// organizations of the site use an organization's private registry
// modules, either every organization (global-module-sharing) or those it
// names (its module consumers; naming them turns global sharing off). A
// member, team, organization or run token of a consumer then lists and
// downloads the modules through the module registry protocol (terraform
// init, inside a run too): the model's OrgReadModules asks SharesModules.
// Nothing else of the sharing organization is shared: not its registry's
// API. Its private providers are shared only globally
// (global-provider-sharing; OrgReadProviders asks SharesProviders).

// ModuleConsumers lists the organizations a site admin named as consumers
// of org's modules, by name.
func (s *Service) ModuleConsumers(ctx context.Context, org string) ([]*Organization, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if _, err := s.get(ctx, s.db, org, false); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scan, `SELECT `+prefixed("o.")+` FROM organizations o JOIN organization_module_consumers c ON c.consumer_name = o.name
		WHERE c.organization_name = ? ORDER BY o.name`, org)
}

// prefixed is cols with every column qualified by prefix.
func prefixed(prefix string) string { return prefix + strings.ReplaceAll(cols, ", ", ", "+prefix) }

// SetModuleConsumers makes names the consumers of org's modules (none
// when empty) and turns global module sharing off. Every name must be
// another organization of the site; nothing changes otherwise.
func (s *Service) SetModuleConsumers(ctx context.Context, org string, names []string) error {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		o, err := s.get(ctx, tx, org, true)
		if err != nil {
			return err
		}
		var set []string
		for _, n := range names {
			if n == o.Name {
				return core.Invalid("organization %s cannot be a consumer of its own modules: they are its own", n)
			}
			if slices.Contains(set, n) {
				continue
			}
			if _, err := s.get(ctx, tx, n, false); err != nil {
				return core.NotFound("Organization %s not found: a module consumer must be an organization of this site", n)
			}
			set = append(set, n)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM organization_module_consumers WHERE organization_name = ?`, o.Name); err != nil {
			return err
		}
		for _, n := range set {
			if _, err := tx.Exec(ctx, `INSERT INTO organization_module_consumers (organization_name, consumer_name) VALUES (?, ?)`, o.Name, n); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE organizations SET global_module_sharing = ?, updated_at = ? WHERE id = ?`, false, core.Micros(core.Now()), o.ID)
		return err
	})
}

// AdminOptions are what a site admin changes of an organization besides
// is-disabled (nil: unchanged).
type AdminOptions struct {
	// GlobalModuleSharing and GlobalProviderSharing share the
	// organization's private modules, or providers, with every
	// organization of the site (named module consumers stay).
	GlobalModuleSharing, GlobalProviderSharing *bool
	// WorkspaceLimit is the most workspaces the organization may have (-1
	// for none).
	WorkspaceLimit *int
	// Disabled disables the organization (or enables it again: OnEnable
	// runs once that is committed).
	Disabled *bool
	// PlanTimeout and ApplyTimeout are the organization's own time limits
	// ("" for the site's).
	PlanTimeout, ApplyTimeout *string
	// AccessBetaTools and WorkerSudo: Organization's fields of the names.
	AccessBetaTools, WorkerSudo *bool
}

// SetAdminOptions changes what opts sets of org, in one transaction.
func (s *Service) SetAdminOptions(ctx context.Context, org string, opts AdminOptions) (*Organization, error) {
	if l := opts.WorkspaceLimit; l != nil && *l < -1 {
		return nil, core.Invalid("workspace-limit must be a number of workspaces (0 or more), or null for none")
	}
	for name, t := range map[string]*string{"plan-timeout": opts.PlanTimeout, "apply-timeout": opts.ApplyTimeout} {
		if t != nil {
			if err := checkTimeout(name, *t); err != nil {
				return nil, err
			}
		}
	}
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	var o *Organization
	enabled := false
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if o, err = s.get(ctx, tx, org, true); err != nil {
			return err
		}
		enabled = opts.Disabled != nil && !*opts.Disabled && o.Disabled
		set(&o.Disabled, opts.Disabled)
		set(&o.GlobalModuleSharing, opts.GlobalModuleSharing)
		set(&o.GlobalProviderSharing, opts.GlobalProviderSharing)
		set(&o.WorkspaceLimit, opts.WorkspaceLimit)
		set(&o.PlanTimeout, opts.PlanTimeout)
		set(&o.ApplyTimeout, opts.ApplyTimeout)
		set(&o.AccessBetaTools, opts.AccessBetaTools)
		set(&o.WorkerSudo, opts.WorkerSudo)
		o.UpdatedAt = core.Now()
		_, err = tx.Exec(ctx, `UPDATE organizations SET global_module_sharing = ?, global_provider_sharing = ?, workspace_limit = ?, is_disabled = ?,
			plan_timeout = ?, apply_timeout = ?, access_beta_tools = ?, worker_sudo = ?, updated_at = ? WHERE id = ?`,
			o.GlobalModuleSharing, o.GlobalProviderSharing, o.WorkspaceLimit, o.Disabled,
			o.PlanTimeout, o.ApplyTimeout, o.AccessBetaTools, o.WorkerSudo, core.Micros(o.UpdatedAt), o.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if enabled {
		for _, fn := range s.OnEnable {
			fn(ctx, o.Name)
		}
	}
	return o, nil
}

// SharesModules reports whether org (not disabled) shares its private
// modules with any of the readers (organization names): globally, or
// naming one of them as a consumer. One statement; the model asks it only
// of a caller that is no member of org.
func (s *Service) SharesModules(ctx context.Context, org string, readers []string) (bool, error) {
	if len(readers) == 0 {
		return false, nil
	}
	in, args := store.In(readers)
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM organizations o WHERE o.name = ? AND NOT o.is_disabled AND (o.global_module_sharing OR EXISTS (
		SELECT 1 FROM organization_module_consumers c WHERE c.organization_name = o.name AND c.consumer_name IN (`+in+`)))`,
		append([]any{org}, args...)...).Scan(&n)
	return n > 0, err
}

// SharesProviders reports whether org (not disabled) shares its private
// providers with every organization, and so with any of the readers (none
// is no caller of another organization).
func (s *Service) SharesProviders(ctx context.Context, org string, readers []string) (bool, error) {
	if len(readers) == 0 {
		return false, nil
	}
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM organizations WHERE name = ? AND NOT is_disabled AND global_provider_sharing`, org).Scan(&n)
	return n > 0, err
}

// WorkspaceLimit returns the most workspaces org may have (-1: no limit),
// reading through q. With a limit, the organization's row stays locked
// until q's transaction ends, so that the workspaces created beside each
// other are counted one after the other.
func (s *Service) WorkspaceLimit(ctx context.Context, q store.Q, org string) (int, error) {
	var limit int
	if err := q.QueryRow(ctx, `SELECT workspace_limit FROM organizations WHERE name = ?`, org).Scan(&limit); err != nil || limit < 0 {
		return -1, err
	}
	lock := store.ForUpdate(q)
	if lock == "" {
		return limit, nil // SQLite: the writing transaction holds the database already
	}
	err := q.QueryRow(ctx, `SELECT workspace_limit FROM organizations WHERE name = ?`+lock, org).Scan(&limit)
	return limit, err
}

// checkTimeout refuses an organization's time limit (attribute name)
// that is neither a positive duration nor "" (the site's).
func checkTimeout(name, v string) error {
	if v == "" {
		return nil
	}
	if _, err := sitesettings.ParseTimeout(v); err != nil {
		return core.Invalid("%s %v (or \"\" for the site's)", name, err)
	}
	return nil
}

// set sets *dst to *v when v is not nil.
func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// BetaTools says whether org's workspaces may use terraform versions
// registered as beta (access-beta-tools), reading through q.
func (s *Service) BetaTools(ctx context.Context, q store.Q, org string) (bool, error) {
	var beta bool
	err := q.QueryRow(ctx, `SELECT access_beta_tools FROM organizations WHERE name = ?`, org).Scan(&beta)
	if store.IsNoRows(err) {
		return false, nil
	}
	return beta, err
}

// RunLimits are what a site admin set of org's runs: its own time limits
// of a plan and an apply ("" for the site's), its access to beta tools
// and whether its runs may gain privileges (sudo). For the job API, which
// gives them to the runner of each job; the caller is not checked.
func (s *Service) RunLimits(ctx context.Context, org string) (planTimeout, applyTimeout string, beta, sudo bool, err error) {
	err = s.db.QueryRow(ctx, `SELECT plan_timeout, apply_timeout, access_beta_tools, worker_sudo FROM organizations WHERE name = ?`, org).
		Scan(&planTimeout, &applyTimeout, &beta, &sudo)
	return planTimeout, applyTimeout, beta, sudo, err
}
