package variable

import (
	"context"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

const varsetCols = `id, organization_name, name, description, is_global, is_priority, parent_project_id, created_at, updated_at`

func scanVarset(sc interface{ Scan(...any) error }) (*VariableSet, error) {
	var vs VariableSet
	var created, updated int64
	if err := sc.Scan(&vs.ID, &vs.Organization, &vs.Name, &vs.Description, &vs.Global, &vs.Priority, &vs.ParentProjectID, &created, &updated); err != nil {
		return nil, err
	}
	vs.CreatedAt, vs.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &vs, nil
}

// loadRelations fills the workspace, project and variable IDs of vs.
func loadRelations(ctx context.Context, q store.Q, vs *VariableSet) error {
	return loadRelationsOf(ctx, q, []*VariableSet{vs})
}

func getVarset(ctx context.Context, q store.Q, id string, lock bool) (*VariableSet, error) {
	if !core.HasPrefix(id, core.PrefixVariableSet) {
		return nil, core.NotFound("variable set %q not found", id)
	}
	query := `SELECT ` + varsetCols + ` FROM variable_sets WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	vs, err := scanVarset(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("variable set %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return vs, nil
}

// varset returns a variable set the caller may read, with its relations.
func (s *Service) varset(ctx context.Context, id string) (*VariableSet, error) {
	vs, err := s.readableVarset(ctx, id)
	if err != nil {
		return nil, err
	}
	return vs, loadRelations(ctx, s.db, vs)
}

// readableVarset returns a variable set (without its relations) the caller
// may read: in its organization, and selected by readableWhere, the rule
// the lists select by. Any other is not found.
func (s *Service) readableVarset(ctx context.Context, id string) (*VariableSet, error) {
	vs, err := getVarset(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := auth.CheckOrganization(ctx, vs.Organization); err != nil {
		return nil, core.NotFound("variable set %q not found", id)
	}
	where, args, err := s.readableWhere(ctx, vs.Organization)
	if err != nil || where == "" {
		return vs, err
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM variable_sets WHERE id = ? AND `+where, append([]any{id}, args...)...).Scan(&n); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, core.NotFound("variable set %q not found", id)
	}
	return vs, nil
}

// VarsetOrganization returns the organization of a variable set in an
// organization the caller may see, whether or not the caller may read the
// set: for the audit record of a request, whose own rule the request
// applies.
func (s *Service) VarsetOrganization(ctx context.Context, id string) (string, error) {
	vs, err := getVarset(ctx, s.db, id, false)
	if err != nil {
		return "", err
	}
	if err := auth.CheckOrganization(ctx, vs.Organization); err != nil {
		return "", core.NotFound("variable set %q not found", id)
	}
	return vs.Organization, nil
}

// readableWhere is the condition on variable_sets rows that selects the
// sets of org the caller in ctx may read, with its arguments ("" for every
// set): those who manage variable sets read them all; others, as HCP
// Terraform documents it (reading a set's variables on a workspace needs
// read variables there), the sets that apply to a workspace whose
// variables they may read (global sets, sets applied to that workspace or
// to its project, sets applied to a workspace of a project whose
// variables they may read), and the sets owned by a project whose
// variable sets they may read. By ID and in every list alike.
func (s *Service) readableWhere(ctx context.Context, org string) (string, []any, error) {
	if canManageVarsets(ctx, org) == nil {
		return "", nil, nil
	}
	r, err := authz.ReadableVariables(ctx, org)
	if err != nil || r.All {
		return "", nil, err
	}
	var conds []string
	var args []any
	// or adds a condition naming ids where it says %s.
	or := func(cond string, ids []string) {
		in, a := store.In(ids)
		conds = append(conds, fmt.Sprintf(cond, in))
		args = append(args, a...)
	}
	if r.Any() {
		conds, args = append(conds, `is_global = ?`), append(args, true)
	}
	if len(r.Workspaces) > 0 {
		or(`id IN (SELECT varset_id FROM variable_set_workspaces WHERE workspace_id IN (%s))`, r.Workspaces)
	}
	if prj := append(append([]string{}, r.Projects...), r.WorkspaceProjects...); len(prj) > 0 {
		or(`id IN (SELECT varset_id FROM variable_set_projects WHERE project_id IN (%s))`, prj)
	}
	if wp, ok := s.workspaces.(WorkspaceProjectSQL); ok && len(r.Projects) > 0 {
		projectOf := strings.ReplaceAll(wp.WorkspaceProjectSQL("vsw.workspace_id"), "%", "%%")
		or(`id IN (SELECT vsw.varset_id FROM variable_set_workspaces vsw WHERE (`+projectOf+`) IN (%s))`, r.Projects)
	}
	if len(r.VarsetProjects) > 0 {
		or(`parent_project_id IN (%s)`, r.VarsetProjects)
	}
	if len(conds) == 0 {
		return "1 = 0", nil, nil
	}
	return `(` + strings.Join(conds, ` OR `) + `)`, args, nil
}

// andReadable adds to a list's condition and arguments the readableWhere
// of org.
func (s *Service) andReadable(ctx context.Context, org, where string, args []any) (string, []any, error) {
	cond, more, err := s.readableWhere(ctx, org)
	if err != nil || cond == "" {
		return where, args, err
	}
	return `(` + where + `) AND ` + cond, append(args, more...), nil
}

// queryVarsets returns at most limit (all when negative) of the variable
// sets matching where whose name contains search, by name, from offset
// on, and how many match in all; the page's relations are read in three
// statements, whatever its size.
func (s *Service) queryVarsets(ctx context.Context, search string, offset, limit int, where string, args ...any) ([]*VariableSet, int, error) {
	where = `(` + where + `)`
	if q := strings.ToLower(search); q != "" {
		where += ` AND LOWER(name) LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike(q)+"%")
	}
	out, total, err := store.Page(ctx, s.db, scanVarset, varsetCols, "variable_sets", where, `name, id`, offset, limit, args...)
	if err != nil {
		return nil, 0, err
	}
	if err := loadRelationsOf(ctx, s.db, out); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// loadRelationsOf is loadRelations for many sets, in three statements.
func loadRelationsOf(ctx context.Context, q store.Q, sets []*VariableSet) error {
	if len(sets) == 0 {
		return nil
	}
	byID := make(map[string]*VariableSet, len(sets))
	ids := make([]string, len(sets))
	for i, vs := range sets {
		byID[vs.ID] = vs
		vs.WorkspaceIDs, vs.ProjectIDs, vs.VarIDs = []string{}, []string{}, []string{}
		ids[i] = vs.ID
	}
	list, args := store.In(ids)
	for _, rel := range []struct {
		query string
		add   func(vs *VariableSet, id string)
	}{
		{`SELECT varset_id, workspace_id FROM variable_set_workspaces WHERE varset_id IN (` + list + `) ORDER BY workspace_id`,
			func(vs *VariableSet, id string) { vs.WorkspaceIDs = append(vs.WorkspaceIDs, id) }},
		{`SELECT varset_id, project_id FROM variable_set_projects WHERE varset_id IN (` + list + `) ORDER BY project_id`,
			func(vs *VariableSet, id string) { vs.ProjectIDs = append(vs.ProjectIDs, id) }},
		{`SELECT varset_id, id FROM variables WHERE varset_id IN (` + list + `) ORDER BY created_at, id`,
			func(vs *VariableSet, id string) { vs.VarIDs = append(vs.VarIDs, id) }},
	} {
		pairs, err := store.Pairs(ctx, q, rel.query, args...)
		if err != nil {
			return err
		}
		for _, p := range pairs {
			if vs := byID[p[0]]; vs != nil {
				rel.add(vs, p[1])
			}
		}
	}
	return nil
}

// ListVarsets returns an organization's variable sets whose name contains
// search (all when empty), ordered by name: at most limit (all when
// negative) from offset on, and how many in all.
func (s *Service) ListVarsets(ctx context.Context, org, search string, offset, limit int) ([]*VariableSet, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	where, args, err := s.andReadable(ctx, org, `organization_name = ?`, []any{org})
	if err != nil {
		return nil, 0, err
	}
	return s.queryVarsets(ctx, search, offset, limit, where, args...)
}

// ListWorkspaceVarsets returns the variable sets that apply to a workspace:
// global sets, sets applied to it and sets applied to its project (paged
// as ListVarsets).
func (s *Service) ListWorkspaceVarsets(ctx context.Context, workspaceID, search string, offset, limit int) ([]*VariableSet, int, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, 0, err
	}
	where, args, err := s.andReadable(ctx, ws.Organization, `organization_name = ? AND (is_global = ?
 OR id IN (SELECT varset_id FROM variable_set_workspaces WHERE workspace_id = ?)
 OR id IN (SELECT varset_id FROM variable_set_projects WHERE project_id = ?))`, []any{ws.Organization, true, ws.ID, ws.ProjectID})
	if err != nil {
		return nil, 0, err
	}
	return s.queryVarsets(ctx, search, offset, limit, where, args...)
}

// ListProjectVarsets returns the variable sets applied to or owned by a
// project (paged as ListVarsets).
func (s *Service) ListProjectVarsets(ctx context.Context, projectID, search string, offset, limit int) ([]*VariableSet, int, error) {
	org, err := s.projectOrg(ctx, projectID)
	if err != nil {
		return nil, 0, err
	}
	where, args, err := s.andReadable(ctx, org, `organization_name = ? AND (parent_project_id = ?
 OR id IN (SELECT varset_id FROM variable_set_projects WHERE project_id = ?))`, []any{org, projectID, projectID})
	if err != nil {
		return nil, 0, err
	}
	return s.queryVarsets(ctx, search, offset, limit, where, args...)
}

// CreateVarsetOptions are a new variable set's attributes and relations.
type CreateVarsetOptions struct {
	VarsetOptions
	// ParentProjectID makes a project-owned set.
	ParentProjectID string
	// WorkspaceIDs and ProjectIDs apply the new set at once.
	WorkspaceIDs []string
	ProjectIDs   []string
}

// CreateVarset makes a variable set in an organization.
func (s *Service) CreateVarset(ctx context.Context, org string, opts CreateVarsetOptions) (*VariableSet, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := canManageVarsets(ctx, org); err != nil {
		return nil, err
	}
	now := core.Now()
	vs := &VariableSet{ID: core.NewID(core.PrefixVariableSet), Organization: org, CreatedAt: now, UpdatedAt: now}
	if err := opts.apply(vs, true); err != nil {
		return nil, err
	}
	if opts.ParentProjectID != "" {
		porg, err := s.projectOrg(ctx, opts.ParentProjectID)
		if err != nil {
			return nil, err
		}
		if porg != org {
			return nil, core.NotFound("project %q not found", opts.ParentProjectID)
		}
		vs.ParentProjectID = opts.ParentProjectID
	}
	if err := s.checkWorkspaces(ctx, org, opts.WorkspaceIDs); err != nil {
		return nil, err
	}
	if err := s.checkProjects(ctx, org, opts.ProjectIDs); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO variable_sets (id, organization_name, name, description, is_global, is_priority, parent_project_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			vs.ID, vs.Organization, vs.Name, vs.Description, vs.Global, vs.Priority, vs.ParentProjectID, core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", vs.Name)
		}
		if err != nil {
			return err
		}
		if err := addLinks(ctx, tx, "variable_set_workspaces", "workspace_id", vs.ID, opts.WorkspaceIDs); err != nil {
			return err
		}
		if err := addLinks(ctx, tx, "variable_set_projects", "project_id", vs.ID, opts.ProjectIDs); err != nil {
			return err
		}
		return loadRelations(ctx, tx, vs)
	})
	if err != nil {
		return nil, err
	}
	return vs, nil
}

// GetVarset returns a variable set the caller may see.
func (s *Service) GetVarset(ctx context.Context, id string) (*VariableSet, error) {
	return s.varset(ctx, id)
}

// UpdateVarset changes a variable set's attributes; a non-nil workspaceIDs
// replaces the set of workspaces it is applied to.
func (s *Service) UpdateVarset(ctx context.Context, id string, opts VarsetOptions, workspaceIDs []string) (*VariableSet, error) {
	vs, err := s.varset(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := canManageVarsets(ctx, vs.Organization); err != nil {
		return nil, err
	}
	if err := s.checkWorkspaces(ctx, vs.Organization, workspaceIDs); err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if vs, err = getVarset(ctx, tx, id, true); err != nil {
			return err
		}
		if err := opts.apply(vs, false); err != nil {
			return err
		}
		vs.UpdatedAt = core.Now()
		_, err = tx.Exec(ctx, `UPDATE variable_sets SET name = ?, description = ?, is_global = ?, is_priority = ?, updated_at = ? WHERE id = ?`,
			vs.Name, vs.Description, vs.Global, vs.Priority, core.Micros(vs.UpdatedAt), vs.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", vs.Name)
		}
		if err != nil {
			return err
		}
		if workspaceIDs != nil {
			if _, err := tx.Exec(ctx, `DELETE FROM variable_set_workspaces WHERE varset_id = ?`, vs.ID); err != nil {
				return err
			}
			if err := addLinks(ctx, tx, "variable_set_workspaces", "workspace_id", vs.ID, workspaceIDs); err != nil {
				return err
			}
		}
		return loadRelations(ctx, tx, vs)
	})
	if err != nil {
		return nil, err
	}
	return vs, nil
}

// DeleteVarset removes a variable set and its variables.
func (s *Service) DeleteVarset(ctx context.Context, id string) error {
	vs, err := s.varset(ctx, id)
	if err != nil {
		return err
	}
	if err := canManageVarsets(ctx, vs.Organization); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		// Delete explicitly rather than rely on SQLite enforcing cascades.
		for _, q := range []string{
			`DELETE FROM variables WHERE varset_id = ?`,
			`DELETE FROM variable_set_workspaces WHERE varset_id = ?`,
			`DELETE FROM variable_set_projects WHERE varset_id = ?`,
		} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return fmt.Errorf("deleting variable set %s: %w", id, err)
			}
		}
		res, err := tx.Exec(ctx, `DELETE FROM variable_sets WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("deleting variable set %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return core.NotFound("variable set %q not found", id)
		}
		return nil
	})
}

// checkWorkspaces makes sure every workspace exists, is visible and belongs
// to org (anything else is a 404, as if it did not exist).
func (s *Service) checkWorkspaces(ctx context.Context, org string, wsIDs []string) error {
	for _, id := range wsIDs {
		ws, err := s.workspace(ctx, id)
		if err != nil {
			return err
		}
		if ws.Organization != org {
			return core.NotFound("workspace %q not found", id)
		}
	}
	return nil
}

func (s *Service) checkProjects(ctx context.Context, org string, prjIDs []string) error {
	for _, id := range prjIDs {
		porg, err := s.projectOrg(ctx, id)
		if err != nil {
			return err
		}
		if porg != org {
			return core.NotFound("project %q not found", id)
		}
	}
	return nil
}

func addLinks(ctx context.Context, q store.Q, table, col, varsetID string, targets []string) error {
	for _, t := range targets {
		if _, err := q.Exec(ctx, `INSERT INTO `+table+` (varset_id, `+col+`) VALUES (?, ?) ON CONFLICT DO NOTHING`, varsetID, t); err != nil {
			return fmt.Errorf("applying variable set %s: %w", varsetID, err)
		}
	}
	return nil
}

func removeLinks(ctx context.Context, q store.Q, table, col, varsetID string, targets []string) error {
	for _, t := range targets {
		if _, err := q.Exec(ctx, `DELETE FROM `+table+` WHERE varset_id = ? AND `+col+` = ?`, varsetID, t); err != nil {
			return fmt.Errorf("removing variable set %s: %w", varsetID, err)
		}
	}
	return nil
}

func (s *Service) changeLinks(ctx context.Context, id string, add bool, workspaces, projects []string) error {
	vs, err := s.varset(ctx, id)
	if err != nil {
		return err
	}
	if err := canManageVarsets(ctx, vs.Organization); err != nil {
		return err
	}
	if err := s.checkWorkspaces(ctx, vs.Organization, workspaces); err != nil {
		return err
	}
	if err := s.checkProjects(ctx, vs.Organization, projects); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := getVarset(ctx, tx, id, true); err != nil {
			return err
		}
		change := removeLinks
		if add {
			change = addLinks
		}
		if err := change(ctx, tx, "variable_set_workspaces", "workspace_id", id, workspaces); err != nil {
			return err
		}
		if err := change(ctx, tx, "variable_set_projects", "project_id", id, projects); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE variable_sets SET updated_at = ? WHERE id = ?`, core.Micros(core.Now()), id)
		return err
	})
}

// ApplyToWorkspaces applies a variable set to more workspaces.
func (s *Service) ApplyToWorkspaces(ctx context.Context, id string, workspaceIDs []string) error {
	return s.changeLinks(ctx, id, true, workspaceIDs, nil)
}

// RemoveFromWorkspaces stops applying a variable set to workspaces.
func (s *Service) RemoveFromWorkspaces(ctx context.Context, id string, workspaceIDs []string) error {
	return s.changeLinks(ctx, id, false, workspaceIDs, nil)
}

// ApplyToProjects applies a variable set to more projects.
func (s *Service) ApplyToProjects(ctx context.Context, id string, projectIDs []string) error {
	return s.changeLinks(ctx, id, true, nil, projectIDs)
}

// RemoveFromProjects stops applying a variable set to projects.
func (s *Service) RemoveFromProjects(ctx context.Context, id string, projectIDs []string) error {
	return s.changeLinks(ctx, id, false, nil, projectIDs)
}

// --- variable set variables ---

func (s *Service) varsetOwner(ctx context.Context, id string, write bool) (owner, error) {
	vs, err := s.readableVarset(ctx, id)
	if err != nil {
		return owner{}, err
	}
	if write {
		if err := canManageVarsets(ctx, vs.Organization); err != nil {
			return owner{}, err
		}
	}
	return owner{org: vs.Organization, varsetID: vs.ID}, nil
}

// ListVarsetVariables returns a variable set's variables (callers redact).
func (s *Service) ListVarsetVariables(ctx context.Context, varsetID string) ([]*Variable, error) {
	o, err := s.varsetOwner(ctx, varsetID, false)
	if err != nil {
		return nil, err
	}
	return s.listVars(ctx, o)
}

// CreateVarsetVariable adds a variable to a variable set.
func (s *Service) CreateVarsetVariable(ctx context.Context, varsetID string, opts VarOptions) (*Variable, error) {
	o, err := s.varsetOwner(ctx, varsetID, true)
	if err != nil {
		return nil, err
	}
	return s.createVar(ctx, o, opts)
}

// GetVarsetVariable returns one variable of a variable set.
func (s *Service) GetVarsetVariable(ctx context.Context, varsetID, id string) (*Variable, error) {
	o, err := s.varsetOwner(ctx, varsetID, false)
	if err != nil {
		return nil, err
	}
	return s.getVar(ctx, s.db, o, id, false)
}

// UpdateVarsetVariable changes a variable of a variable set.
func (s *Service) UpdateVarsetVariable(ctx context.Context, varsetID, id string, opts VarOptions) (*Variable, error) {
	o, err := s.varsetOwner(ctx, varsetID, true)
	if err != nil {
		return nil, err
	}
	return s.updateVar(ctx, o, id, opts)
}

// DeleteVarsetVariable removes a variable from a variable set.
func (s *Service) DeleteVarsetVariable(ctx context.Context, varsetID, id string) error {
	o, err := s.varsetOwner(ctx, varsetID, true)
	if err != nil {
		return err
	}
	return s.deleteVar(ctx, o, id)
}
