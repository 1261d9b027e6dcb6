package variable

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Service manages variables and variable sets.
type Service struct {
	db         *store.DB
	workspaces Workspaces
	projects   Projects
	// Keys seals every variable's value at rest (ValueColumn); nil stores
	// values as given.
	Keys *seal.Keyring
}

// ValueColumn is the sealed column of this domain: every value, sensitive
// or not, of workspace variables and variable sets (seal.Keyring.Migrate
// seals rows written before encryption at rest).
var ValueColumn = seal.Column{Table: "variables", IDColumn: "id", Column: "value", Purpose: "variables.value"}

// NewService returns a variable service. workspaces and projects may be nil
// until those domains exist; then every workspace or project lookup is a
// 404.
func NewService(db *store.DB, workspaces Workspaces, projects Projects) *Service {
	return &Service{db: db, workspaces: workspaces, projects: projects}
}

func newVersionID() string {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// workspace returns a workspace the caller may see.
func (s *Service) workspace(ctx context.Context, id string) (*Workspace, error) {
	if !core.HasPrefix(id, core.PrefixWorkspace) || s.workspaces == nil {
		return nil, core.NotFound("workspace %q not found", id)
	}
	ws, err := s.workspaces.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	// Defence in depth: the lookup is access-checked, check again.
	if err := auth.CheckOrganization(ctx, ws.Organization); err != nil {
		return nil, core.NotFound("workspace %q not found", id)
	}
	return ws, nil
}

// projectOrg returns the organization of a project the caller may see.
func (s *Service) projectOrg(ctx context.Context, id string) (string, error) {
	if !core.HasPrefix(id, core.PrefixProject) || s.projects == nil {
		return "", core.NotFound("project %q not found", id)
	}
	org, err := s.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return "", core.NotFound("project %q not found", id)
	}
	return org, nil
}

// canWriteWorkspaceVars refuses run and agent tokens, which may read a
// workspace but never change its variables.
func canWriteWorkspaceVars(ctx context.Context) error {
	return auth.RequireKind(ctx, auth.KindUser, auth.KindTeam, auth.KindOrganization)
}

// canManageVarsets allows organization owners (owners-team members, the
// organization token, site admins) to change variable sets.
func canManageVarsets(ctx context.Context, org string) error {
	if authz.Allows(ctx, authz.OrgManageVarsets, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage variable sets of organization %q", org)
	}
	return nil
}

// --- variables, common to workspaces and variable sets ---

// owner is what a variable belongs to.
type owner struct {
	org         string
	workspaceID string
	varsetID    string
}

func (o owner) where() (string, string) {
	if o.varsetID != "" {
		return "varset_id = ?", o.varsetID
	}
	return "workspace_id = ?", o.workspaceID
}

const varCols = `id, organization_name, COALESCE(workspace_id, ''), COALESCE(varset_id, ''), var_key, value, description, category, hcl, sensitive, version_id, created_at, updated_at`

func scanVar(sc interface{ Scan(...any) error }) (*Variable, error) {
	var v Variable
	var created, updated int64
	var cat string
	if err := sc.Scan(&v.ID, &v.Organization, &v.WorkspaceID, &v.VarsetID, &v.Key, &v.Value, &v.Description, &cat, &v.HCL, &v.Sensitive, &v.VersionID, &created, &updated); err != nil {
		return nil, err
	}
	v.Category = Category(cat)
	v.CreatedAt, v.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &v, nil
}

func (s *Service) queryVars(ctx context.Context, q store.Q, where string, args ...any) ([]*Variable, error) {
	rows, err := q.Query(ctx, `SELECT `+varCols+` FROM variables WHERE `+where+` ORDER BY created_at, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Variable{}
	for rows.Next() {
		v, err := scanVar(rows)
		if err != nil {
			return nil, err
		}
		if v.Value, err = s.Keys.OpenString(ValueColumn.Purpose, v.Value); err != nil {
			return nil, fmt.Errorf("variable %s: %w", v.ID, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

func (s *Service) listVars(ctx context.Context, o owner) ([]*Variable, error) {
	w, arg := o.where()
	return s.queryVars(ctx, s.db, w, arg)
}

func (s *Service) getVar(ctx context.Context, q store.Q, o owner, id string, lock bool) (*Variable, error) {
	if !core.HasPrefix(id, core.PrefixVariable) {
		return nil, core.NotFound("variable %q not found", id)
	}
	w, arg := o.where()
	query := `SELECT ` + varCols + ` FROM variables WHERE id = ? AND ` + w
	if lock {
		query += store.ForUpdate(q)
	}
	v, err := scanVar(q.QueryRow(ctx, query, id, arg))
	if store.IsNoRows(err) {
		return nil, core.NotFound("variable %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if v.Value, err = s.Keys.OpenString(ValueColumn.Purpose, v.Value); err != nil {
		return nil, fmt.Errorf("variable %s: %w", v.ID, err)
	}
	return v, nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func duplicateKey(v *Variable) error {
	return core.Invalid("key %q has already been taken (category %s)", v.Key, v.Category)
}

// touchVarset marks a variable set as changed when its variables change.
func touchVarset(ctx context.Context, q store.Q, o owner) error {
	if o.varsetID == "" {
		return nil
	}
	_, err := q.Exec(ctx, `UPDATE variable_sets SET updated_at = ? WHERE id = ?`, core.Micros(core.Now()), o.varsetID)
	return err
}

func (s *Service) createVar(ctx context.Context, o owner, opts VarOptions) (*Variable, error) {
	now := core.Now()
	v := &Variable{ID: core.NewID(core.PrefixVariable), Organization: o.org, WorkspaceID: o.workspaceID, VarsetID: o.varsetID,
		VersionID: newVersionID(), CreatedAt: now, UpdatedAt: now}
	if err := opts.apply(v, true); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		sealed, err := s.Keys.SealString(ValueColumn.Purpose, v.Value)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO variables (id, organization_name, workspace_id, varset_id, var_key, value, description, category, hcl, sensitive, version_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			v.ID, v.Organization, nullable(v.WorkspaceID), nullable(v.VarsetID), v.Key, sealed, v.Description, string(v.Category), v.HCL, v.Sensitive, v.VersionID, core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return duplicateKey(v)
		}
		if err != nil {
			// The error may quote the statement's arguments: never the value.
			return fmt.Errorf("creating variable %s: %w", v.ID, redactErr(err, v.Value))
		}
		return touchVarset(ctx, tx, o)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (s *Service) updateVar(ctx context.Context, o owner, id string, opts VarOptions) (*Variable, error) {
	var v *Variable
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		if v, err = s.getVar(ctx, tx, o, id, true); err != nil {
			return err
		}
		if err := opts.apply(v, false); err != nil {
			return err
		}
		v.VersionID = newVersionID()
		v.UpdatedAt = core.Now()
		sealed, err := s.Keys.SealString(ValueColumn.Purpose, v.Value)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE variables SET var_key = ?, value = ?, description = ?, category = ?, hcl = ?, sensitive = ?, version_id = ?, updated_at = ? WHERE id = ?`,
			v.Key, sealed, v.Description, string(v.Category), v.HCL, v.Sensitive, v.VersionID, core.Micros(v.UpdatedAt), v.ID)
		if store.IsUniqueViolation(tx, err) {
			return duplicateKey(v)
		}
		if err != nil {
			return fmt.Errorf("updating variable %s: %w", v.ID, redactErr(err, v.Value))
		}
		return touchVarset(ctx, tx, o)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

func (s *Service) deleteVar(ctx context.Context, o owner, id string) error {
	if !core.HasPrefix(id, core.PrefixVariable) {
		return core.NotFound("variable %q not found", id)
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		w, arg := o.where()
		res, err := tx.Exec(ctx, `DELETE FROM variables WHERE id = ? AND `+w, id, arg)
		if err != nil {
			return fmt.Errorf("deleting variable %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return core.NotFound("variable %q not found", id)
		}
		return touchVarset(ctx, tx, o)
	})
}

// redactErr keeps a driver error from carrying a variable's value into a log.
func redactErr(err error, value string) error {
	if value == "" || !strings.Contains(err.Error(), value) {
		return err
	}
	return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), value, "***"))
}

// --- workspace variables ---

// ListWorkspaceVariables returns a workspace's own variables (sensitive
// values included: callers showing them must use Redacted).
func (s *Service) ListWorkspaceVariables(ctx context.Context, workspaceID string) ([]*Variable, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.listVars(ctx, owner{org: ws.Organization, workspaceID: ws.ID})
}

// CreateWorkspaceVariable adds a variable to a workspace.
func (s *Service) CreateWorkspaceVariable(ctx context.Context, workspaceID string, opts VarOptions) (*Variable, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := canWriteWorkspaceVars(ctx); err != nil {
		return nil, err
	}
	return s.createVar(ctx, owner{org: ws.Organization, workspaceID: ws.ID}, opts)
}

// GetWorkspaceVariable returns one of a workspace's variables.
func (s *Service) GetWorkspaceVariable(ctx context.Context, workspaceID, id string) (*Variable, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.getVar(ctx, s.db, owner{org: ws.Organization, workspaceID: ws.ID}, id, false)
}

// UpdateWorkspaceVariable changes a workspace variable; every update gets a
// new version ID.
func (s *Service) UpdateWorkspaceVariable(ctx context.Context, workspaceID, id string, opts VarOptions) (*Variable, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := canWriteWorkspaceVars(ctx); err != nil {
		return nil, err
	}
	return s.updateVar(ctx, owner{org: ws.Organization, workspaceID: ws.ID}, id, opts)
}

// DeleteWorkspaceVariable removes a workspace variable.
func (s *Service) DeleteWorkspaceVariable(ctx context.Context, workspaceID, id string) error {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return err
	}
	if err := canWriteWorkspaceVars(ctx); err != nil {
		return err
	}
	return s.deleteVar(ctx, owner{org: ws.Organization, workspaceID: ws.ID}, id)
}

// WorkspaceVariableIDs returns the IDs of a workspace's own variables, for
// the workspace's "vars" relationship. It is not access-checked.
func (s *Service) WorkspaceVariableIDs(ctx context.Context, workspaceID string) ([]string, error) {
	return store.Strings(ctx, s.db, `SELECT id FROM variables WHERE workspace_id = ? ORDER BY created_at, id`, workspaceID)
}

// DeleteWorkspaceVariables removes a workspace's variables and its variable
// set assignments; the workspace domain calls it inside the transaction
// that deletes the workspace.
func DeleteWorkspaceVariables(ctx context.Context, q store.Q, workspaceID string) error {
	if _, err := q.Exec(ctx, `DELETE FROM variables WHERE workspace_id = ?`, workspaceID); err != nil {
		return fmt.Errorf("deleting variables of workspace %s: %w", workspaceID, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM variable_set_workspaces WHERE workspace_id = ?`, workspaceID); err != nil {
		return fmt.Errorf("removing variable sets from workspace %s: %w", workspaceID, err)
	}
	return nil
}

// DeleteProjectVariableSets removes a project's variable set assignments
// and the variable sets it owns; the project domain calls it inside the
// transaction that deletes the project.
func DeleteProjectVariableSets(ctx context.Context, q store.Q, projectID string) error {
	if _, err := q.Exec(ctx, `DELETE FROM variable_set_projects WHERE project_id = ?`, projectID); err != nil {
		return fmt.Errorf("removing variable sets from project %s: %w", projectID, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM variables WHERE varset_id IN (SELECT id FROM variable_sets WHERE parent_project_id = ?)`, projectID); err != nil {
		return fmt.Errorf("deleting variables of project %s's variable sets: %w", projectID, err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM variable_sets WHERE parent_project_id = ?`, projectID); err != nil {
		return fmt.Errorf("deleting variable sets of project %s: %w", projectID, err)
	}
	return nil
}

// --- effective variables ---

// EffectiveVariablesOf returns the variables a run in the workspace
// receives, with their values (sensitive ones included: for the runner
// only, never for an API response or a log). org is the workspace's
// organization (whose global variable sets apply) and projectID its
// project, both as the caller read them with the workspace. It is not
// access-checked.
//
// Precedence follows HCP Terraform. For each (category, key) the variable
// with the lowest rank wins:
//
//	0  priority variable set, global
//	1  priority variable set, applied to the workspace's project
//	2  priority variable set, applied to the workspace
//	3  workspace variable
//	4  variable set applied to the workspace
//	5  variable set applied to the workspace's project
//	6  global variable set
//
// (Priority sets override everything more specific, workspace variables
// included; without priority the most specific scope wins.) A set that
// qualifies at several scopes takes its lowest rank. Between sets of the
// same rank, the set whose name sorts first wins, as HCP Terraform does.
// A terraform variable and an env variable with the same key do not
// conflict. The result is ordered by category, then key.
func (s *Service) EffectiveVariablesOf(ctx context.Context, org, workspaceID, projectID string) ([]*Variable, error) {
	type candidate struct {
		v    *Variable
		rank int
		set  string // variable set name, "" for workspace variables
	}
	var cands []candidate
	wsVars, err := s.queryVars(ctx, s.db, `workspace_id = ?`, workspaceID)
	if err != nil {
		return nil, err
	}
	for _, v := range wsVars {
		cands = append(cands, candidate{v: v, rank: 3})
	}
	// Every variable set that applies, with the scope it applies through:
	// 0 global, 1 project, 2 workspace.
	rows, err := s.db.Query(ctx, `
SELECT vs.id, vs.name, vs.is_priority, 0 FROM variable_sets vs WHERE vs.organization_name = ? AND vs.is_global = ?
UNION ALL
SELECT vs.id, vs.name, vs.is_priority, 1 FROM variable_sets vs JOIN variable_set_projects p ON p.varset_id = vs.id WHERE vs.organization_name = ? AND p.project_id = ?
UNION ALL
SELECT vs.id, vs.name, vs.is_priority, 2 FROM variable_sets vs JOIN variable_set_workspaces w ON w.varset_id = vs.id WHERE vs.organization_name = ? AND w.workspace_id = ?`,
		org, true, org, projectID, org, workspaceID)
	if err != nil {
		return nil, err
	}
	type setRank struct {
		name string
		rank int
	}
	sets := map[string]setRank{}
	for rows.Next() {
		var id, name string
		var priority bool
		var scope int
		if err := rows.Scan(&id, &name, &priority, &scope); err != nil {
			rows.Close()
			return nil, err
		}
		rank := 6 - scope // 6 global, 5 project, 4 workspace
		if priority {
			rank = scope // 0 global, 1 project, 2 workspace
		}
		if cur, ok := sets[id]; !ok || rank < cur.rank {
			sets[id] = setRank{name: name, rank: rank}
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for id, sr := range sets {
		vars, err := s.queryVars(ctx, s.db, `varset_id = ?`, id)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			cands = append(cands, candidate{v: v, rank: sr.rank, set: sr.name})
		}
	}
	sort.SliceStable(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.rank != b.rank {
			return a.rank < b.rank
		}
		if a.set != b.set {
			return a.set < b.set
		}
		return a.v.VarsetID < b.v.VarsetID
	})
	seen := map[string]bool{}
	out := []*Variable{}
	for _, c := range cands {
		k := string(c.v.Category) + "\x00" + c.v.Key
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, c.v)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Category != out[j].Category {
			return out[i].Category > out[j].Category // terraform before env
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// ListAllWorkspaceVariables returns the effective variables of a workspace
// the caller may see (see EffectiveVariablesOf); callers must redact them.
func (s *Service) ListAllWorkspaceVariables(ctx context.Context, workspaceID string) ([]*Variable, error) {
	ws, err := s.workspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	return s.EffectiveVariablesOf(ctx, ws.Organization, ws.ID, ws.ProjectID)
}

// WorkspaceVariableIDsSQL says WorkspaceVariableIDs in SQL, for the
// workspace read's one document statement: a scalar subquery over ws.id
// aggregating the IDs, in the same order, comma-separated (NULL for none;
// an ID has no comma).
func (s *Service) WorkspaceVariableIDsSQL() string {
	return `SELECT string_agg(v.id, ',' ORDER BY v.created_at, v.id) FROM variables v WHERE v.workspace_id = ws.id`
}
