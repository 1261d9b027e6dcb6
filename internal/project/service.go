package project

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// OrgDefaults tells an organization's default execution mode and agent
// pool; the organization domain provides it (nil means "remote").
type OrgDefaults interface {
	// It reads through q (inside a transaction, its Tx), for a project
	// already read: without checking the caller.
	OrgDefaults(ctx context.Context, q store.Q, org string) (executionMode, agentPoolID string, err error)
}

// Workspaces counts the workspaces in a project; the workspace domain
// provides it so that a project holding workspaces is not deleted.
type Workspaces interface {
	// CountInProject counts through q, the transaction deleting the
	// project.
	CountInProject(ctx context.Context, q store.Q, projectID string) (int, error)
}

// AgentPools resolves agent pools; the agent domain provides it (nil
// accepts any default-agent-pool-id).
type AgentPools interface {
	// KeepPool keeps pool id of organization org from being deleted
	// until q's transaction ends (core.Invalid when org has no such pool,
	// or has it no more).
	KeepPool(ctx context.Context, q store.Q, org, id string) error
}

// keepPool, in the transaction q that writes o, checks o's default agent
// pool and keeps it from being deleted before q commits
// (agent.Service.Delete counts the projects naming it after locking it).
func (s *Service) keepPool(ctx context.Context, q store.Q, org string, o Options) error {
	if s.Pools == nil || o.AgentPoolID == nil || *o.AgentPoolID == "" {
		return nil
	}
	return s.Pools.KeepPool(ctx, q, org, *o.AgentPoolID)
}

// MaxTagBindings is the most tag bindings one project may carry.
const MaxTagBindings = 10

// Service manages projects.
type Service struct {
	db *store.DB
	// Orgs and Workspaces are wired by the composition root; both may be nil.
	Orgs       OrgDefaults
	Workspaces Workspaces
	Pools      AgentPools
	// OnDelete runs inside the transaction that deletes a project.
	OnDelete []func(ctx context.Context, q store.Q, projectID string) error
}

// NewService returns a project service.
func NewService(db *store.DB) *Service { return &Service{db: db} }

// Options are the attributes of a new or changed project; nil fields are
// unchanged (or defaulted on create).
type Options struct {
	Name                        *string
	Description                 *string
	ExecutionMode               *string
	AgentPoolID                 *string
	ExecutionModeOverwrite      *bool
	AgentPoolOverwrite          *bool
	AutoDestroyActivityDuration *string // "" clears
	// TagBindings replaces the project's bindings when non-nil.
	TagBindings *[]TagBinding
}

const cols = `id, organization_name, name, description, is_default, attrs, created_at, updated_at`

func scan(sc interface{ Scan(...any) error }) (*Project, error) {
	var p Project
	var attrs string
	var created, updated int64
	if err := sc.Scan(&p.ID, &p.Organization, &p.Name, &p.Description, &p.IsDefault, &attrs, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(attrs), &p.Settings); err != nil {
		return nil, fmt.Errorf("decoding settings of project %s: %w", p.ID, err)
	}
	p.CreatedAt, p.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &p, nil
}

func (s *Service) load(ctx context.Context, q store.Q, id string, forUpdate bool) (*Project, error) {
	return s.loadFor(ctx, q, id, forUpdate, true)
}

// loadFor is load, checking the caller's access or not.
func (s *Service) loadFor(ctx context.Context, q store.Q, id string, forUpdate, checkCaller bool) (*Project, error) {
	if !core.HasPrefix(id, core.PrefixProject) {
		return nil, core.NotFound("project %q not found", id)
	}
	query := `SELECT ` + cols + ` FROM projects WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	p, err := scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("project %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if checkCaller {
		if err := auth.CheckOrganization(ctx, p.Organization); err != nil {
			return nil, core.NotFound("project %q not found", id)
		}
	}
	if p.TagBindings, err = s.bindings(ctx, q, p.ID); err != nil {
		return nil, err
	}
	return p, nil
}

func (s *Service) bindings(ctx context.Context, q store.Q, projectID string) ([]TagBinding, error) {
	rows, err := q.Query(ctx, `SELECT id, tag_key, tag_value FROM project_tag_bindings WHERE project_id = ? ORDER BY created_at, tag_key`, projectID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []TagBinding
	for rows.Next() {
		var b TagBinding
		if err := rows.Scan(&b.ID, &b.Key, &b.Value); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Get returns a project the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Project, error) {
	return s.load(ctx, s.db, id, false)
}

// SystemIn returns a project without checking the caller, reading through
// q (inside a transaction, its Tx): for the project of a workspace already
// read, whether by a caller who may see it or by the server itself.
func (s *Service) SystemIn(ctx context.Context, q store.Q, id string) (*Project, error) {
	return s.loadFor(ctx, q, id, false, false)
}

// LockIn takes the project's row for the rest of q's transaction on
// PostgreSQL (nothing on SQLite; core.NotFound if it is gone), for another
// domain that decides over what hangs on the project: notify counts its
// configurations under it, and locks nothing of the project's after it.
func (s *Service) LockIn(ctx context.Context, q store.Q, id string) error {
	if lock := store.ForUpdate(q); lock != "" {
		var one int
		err := q.QueryRow(ctx, `SELECT 1 FROM projects WHERE id = ?`+lock, id).Scan(&one)
		if store.IsNoRows(err) { // deleted since the caller read it
			return core.NotFound("project %q not found", id)
		}
		if err != nil {
			return fmt.Errorf("locking project %s: %w", id, err)
		}
	}
	return nil
}

// ListOptions filter a project list.
type ListOptions struct {
	Names  []string // exact names (filter[names])
	Query  string   // substring of the name (q)
	Tagged []TagBinding
}

// List returns an organization's projects that the caller may read and
// that match opts, newest first.
func (s *Service) List(ctx context.Context, org string, opts ListOptions) ([]*Project, error) {
	ps, _, err := s.ListPage(ctx, org, opts, 0, -1)
	return ps, err
}

// ListPage returns at most limit (all when negative) of the projects List
// returns, from offset on, and how many List returns in all: filtered (to
// the projects the caller may read, among others) and paged in the store,
// with the page's tag bindings read in one statement.
func (s *Service) ListPage(ctx context.Context, org string, opts ListOptions, offset, limit int) ([]*Project, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	where := `p.organization_name = ?`
	args := []any{org}
	// Only the projects the caller may read one by one (HCP Terraform
	// lists those): selected in the store, so the page and its count are
	// right.
	readable, rargs, err := authz.ReadableProjects(ctx, org)
	if err != nil {
		return nil, 0, err
	}
	if readable != "" {
		where += ` AND ` + readable
		args = append(args, rargs...)
	}
	if len(opts.Names) > 0 {
		in, names := store.In(opts.Names)
		where += ` AND p.name IN (` + in + `)`
		args = append(args, names...)
	}
	if q := strings.ToLower(opts.Query); q != "" {
		where += ` AND LOWER(p.name) LIKE ?` + store.LikeEscape
		args = append(args, "%"+store.EscapeLike(q)+"%")
	}
	for _, b := range opts.Tagged {
		where += ` AND EXISTS (SELECT 1 FROM project_tag_bindings b WHERE b.project_id = p.id AND b.tag_key = ?`
		args = append(args, b.Key)
		if b.Value != "" {
			where += ` AND b.tag_value = ?`
			args = append(args, b.Value)
		}
		where += `)`
	}
	out, total, err := store.Page(ctx, s.db, scan, prefixed("p.", cols), "projects p", where, `p.created_at DESC, p.id DESC`, offset, limit, args...)
	if err != nil {
		return nil, 0, err
	}
	if err := s.fillBindings(ctx, out); err != nil {
		return nil, 0, err
	}
	return out, total, nil
}

// prefixed qualifies each of a comma-separated column list with prefix.
func prefixed(prefix, list string) string {
	cs := strings.Split(list, ",")
	for i, c := range cs {
		cs[i] = prefix + strings.TrimSpace(c)
	}
	return strings.Join(cs, ", ")
}

// fillBindings reads the tag bindings of projects, in one statement.
func (s *Service) fillBindings(ctx context.Context, ps []*Project) error {
	if len(ps) == 0 {
		return nil
	}
	byID := make(map[string]*Project, len(ps))
	ids := make([]string, len(ps))
	for i, p := range ps {
		byID[p.ID] = p
		p.TagBindings = nil
		ids[i] = p.ID
	}
	in, args := store.In(ids)
	rows, err := s.db.Query(ctx, `SELECT project_id, id, tag_key, tag_value FROM project_tag_bindings WHERE project_id IN (`+in+`) ORDER BY created_at, tag_key`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var pid string
		var b TagBinding
		if err := rows.Scan(&pid, &b.ID, &b.Key, &b.Value); err != nil {
			return err
		}
		if p := byID[pid]; p != nil {
			p.TagBindings = append(p.TagBindings, b)
		}
	}
	return rows.Err()
}

// checked loads project id and asks the authorization model whether the
// caller may do action on it, before any transaction: the model reads the
// caller's teams, which inside a transaction would take a second pooled
// connection. A project's organization and ID never change, so the answer
// holds for the transaction that follows (which loads the project again
// and finds it gone if it was deleted meanwhile).
func (s *Service) checked(ctx context.Context, id string, action authz.Action) (*Project, error) {
	p, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	return p, s.requireProject(ctx, action, p)
}

// requireProject asks the authorization model whether the caller may do
// action on project p (its admins and custom grants, manage-projects,
// owners).
func (s *Service) requireProject(ctx context.Context, action authz.Action, p *Project) error {
	if authz.Allows(ctx, action, authz.Resource{Organization: p.Organization, ProjectID: p.ID}) != nil {
		return core.Forbidden("you may not change project %q", p.Name)
	}
	return nil
}

func (s *Service) requireOwner(ctx context.Context, org string) error {
	if authz.Allows(ctx, authz.OrgCreateProject, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage projects of organization %q", org)
	}
	return nil
}

// apply validates opts and applies them to p.
func (s *Service) apply(p *Project, o Options) error {
	if o.Name != nil {
		if err := ValidateName(*o.Name); err != nil {
			return err
		}
		p.Name = *o.Name
	}
	if o.Description != nil {
		p.Description = *o.Description
	}
	st := &p.Settings
	if o.AutoDestroyActivityDuration != nil {
		if *o.AutoDestroyActivityDuration != "" {
			if err := ValidateAutoDestroyDuration(*o.AutoDestroyActivityDuration); err != nil {
				return err
			}
		}
		st.AutoDestroyActivityDuration = *o.AutoDestroyActivityDuration
	}
	if o.ExecutionModeOverwrite != nil && o.AgentPoolOverwrite != nil && *o.ExecutionModeOverwrite != *o.AgentPoolOverwrite {
		return core.Invalid("If agent-pool and execution-mode are both included in setting-overwrites, their values must be the same.")
	}
	if o.ExecutionMode != nil {
		m := *o.ExecutionMode
		if m != "remote" && m != "local" && m != "agent" {
			return core.Invalid("default-execution-mode must be one of remote, local or agent, not %q", m)
		}
		st.ExecutionMode, st.ExecutionModeOverwrite, st.AgentPoolOverwrite = m, true, true
		if m != "agent" {
			st.AgentPoolID = ""
		}
	}
	if o.AgentPoolID != nil {
		mode := st.ExecutionMode
		if !st.ExecutionModeOverwrite || mode != "agent" {
			return core.Invalid("default-agent-pool-id must not be specified unless using 'agent' execution mode")
		}
		st.AgentPoolID = *o.AgentPoolID
	}
	if o.ExecutionMode != nil && *o.ExecutionMode == "agent" && st.AgentPoolID == "" {
		return core.Invalid("default-agent-pool-id must be specified when using 'agent' execution mode")
	}
	if o.ExecutionModeOverwrite != nil && !*o.ExecutionModeOverwrite {
		st.ExecutionModeOverwrite, st.ExecutionMode = false, ""
	}
	if o.AgentPoolOverwrite != nil && !*o.AgentPoolOverwrite {
		st.AgentPoolOverwrite, st.AgentPoolID = false, ""
	}
	if o.TagBindings != nil {
		if len(*o.TagBindings) > MaxTagBindings {
			return core.Invalid("tag bindings cannot exceed %d bindings per resource", MaxTagBindings)
		}
		for _, b := range *o.TagBindings {
			if err := validateTagBinding(b); err != nil {
				return err
			}
		}
	}
	return nil
}

func validateTagBinding(b TagBinding) error {
	if !ValidTagKey(b.Key) {
		return core.Invalid("tag binding key %q is invalid: a key is %s", b.Key, TagKeyRule)
	}
	if !ValidTagValue(b.Value) {
		return core.Invalid("tag binding value %q of key %q is invalid: a value is %s", b.Value, b.Key, TagValueRule)
	}
	return nil
}

// Create adds a project to an organization; only owners may.
func (s *Service) Create(ctx context.Context, org string, o Options) (*Project, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := s.requireOwner(ctx, org); err != nil {
		return nil, err
	}
	if o.Name == nil || *o.Name == "" {
		return nil, core.Invalid("name is required")
	}
	now := core.Now()
	p := &Project{ID: core.NewID(core.PrefixProject), Organization: org, CreatedAt: now, UpdatedAt: now}
	if err := s.apply(p, o); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepPool(ctx, tx, org, o); err != nil {
			return err
		}
		attrs, _ := json.Marshal(p.Settings)
		_, err := tx.Exec(ctx, `INSERT INTO projects (id, organization_name, name, description, is_default, attrs, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			p.ID, org, p.Name, p.Description, false, string(attrs), core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", p.Name)
		}
		if err != nil {
			return err
		}
		if o.TagBindings != nil {
			return s.replaceBindings(ctx, tx, p, *o.TagBindings)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, p.ID)
}

func (s *Service) replaceBindings(ctx context.Context, q store.Q, p *Project, bs []TagBinding) error {
	if _, err := q.Exec(ctx, `DELETE FROM project_tag_bindings WHERE project_id = ?`, p.ID); err != nil {
		return err
	}
	return s.addBindings(ctx, q, p, bs)
}

func (s *Service) addBindings(ctx context.Context, q store.Q, p *Project, bs []TagBinding) error {
	now := core.Micros(core.Now())
	for i, b := range bs {
		if err := validateTagBinding(b); err != nil {
			return err
		}
		res, err := q.Exec(ctx, `UPDATE project_tag_bindings SET tag_value = ? WHERE project_id = ? AND tag_key = ?`, b.Value, p.ID, b.Key)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO project_tag_bindings (id, project_id, tag_key, tag_value, created_at) VALUES (?, ?, ?, ?, ?)`,
			core.NewID(core.PrefixTagBinding), p.ID, b.Key, b.Value, now+int64(i)); err != nil {
			return err
		}
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM project_tag_bindings WHERE project_id = ?`, p.ID).Scan(&n); err != nil {
		return err
	}
	if n > MaxTagBindings {
		return core.Invalid("tag bindings cannot exceed %d bindings per resource", MaxTagBindings)
	}
	return nil
}

// Update changes a project; only owners may.
func (s *Service) Update(ctx context.Context, id string, o Options) (*Project, error) {
	_, err := s.checked(ctx, id, authz.ProjectUpdate)
	if err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		p, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if err := s.apply(p, o); err != nil {
			return err
		}
		if err := s.keepPool(ctx, tx, p.Organization, o); err != nil {
			return err
		}
		p.UpdatedAt = core.Now()
		attrs, _ := json.Marshal(p.Settings)
		_, err = tx.Exec(ctx, `UPDATE projects SET name = ?, description = ?, attrs = ?, updated_at = ? WHERE id = ?`,
			p.Name, p.Description, string(attrs), core.Micros(p.UpdatedAt), p.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("name %q has already been taken", p.Name)
		}
		if err != nil {
			return err
		}
		if o.TagBindings != nil {
			return s.replaceBindings(ctx, tx, p, *o.TagBindings)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// AddTagBindings adds bindings or changes the values of existing keys.
func (s *Service) AddTagBindings(ctx context.Context, id string, bs []TagBinding) ([]TagBinding, error) {
	if _, err := s.checked(ctx, id, authz.ProjectUpdate); err != nil {
		return nil, err
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		p, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		return s.addBindings(ctx, tx, p, bs)
	})
	if err != nil {
		return nil, err
	}
	p, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return p.TagBindings, nil
}

// Delete removes a project. The default project and projects that still
// hold workspaces cannot be deleted.
func (s *Service) Delete(ctx context.Context, id string) error {
	if _, err := s.checked(ctx, id, authz.ProjectDelete); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		p, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if p.IsDefault {
			return core.Conflict("the default project of an organization cannot be deleted")
		}
		if s.Workspaces != nil {
			n, err := s.Workspaces.CountInProject(ctx, tx, p.ID)
			if err != nil {
				return err
			}
			if n > 0 {
				return core.Conflict("project %q still contains %d workspace(s): move or delete them first", p.Name, n)
			}
		}
		for _, fn := range s.OnDelete {
			if err := fn(ctx, tx, p.ID); err != nil {
				return fmt.Errorf("deleting project %s: %w", p.ID, err)
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM projects WHERE id = ?`, p.ID)
		return err
	})
}

// Effective returns the execution mode and agent pool that apply to p,
// falling back to the organization's defaults when not overwritten.
func (s *Service) Effective(ctx context.Context, p *Project) (mode, agentPoolID string, err error) {
	return s.EffectiveIn(ctx, s.db, p)
}

// EffectiveIn is Effective reading through q (inside a transaction, its Tx).
func (s *Service) EffectiveIn(ctx context.Context, q store.Q, p *Project) (mode, agentPoolID string, err error) {
	var orgMode, orgPool string
	if s.Orgs != nil {
		if orgMode, orgPool, err = s.Orgs.OrgDefaults(ctx, q, p.Organization); err != nil {
			return "", "", err
		}
	}
	mode, agentPoolID = s.effective(p.Settings, orgMode, orgPool)
	return mode, agentPoolID, nil
}

// effective is EffectiveIn once the organization's defaults are known.
func (s *Service) effective(ps Settings, orgMode, orgPool string) (mode, agentPoolID string) {
	mode, agentPoolID = "remote", ""
	if s.Orgs != nil {
		mode, agentPoolID = orgMode, orgPool
		if mode == "" {
			mode = "remote"
		}
	}
	if ps.ExecutionModeOverwrite {
		mode = ps.ExecutionMode
		agentPoolID = ""
	}
	if ps.AgentPoolOverwrite && ps.AgentPoolID != "" {
		agentPoolID = ps.AgentPoolID
	}
	if mode != "agent" {
		agentPoolID = ""
	}
	return mode, agentPoolID
}

// UsingPool counts the projects whose default agent pool is poolID.
func UsingPool(ctx context.Context, q store.Q, poolID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM projects WHERE attrs LIKE ?`+store.LikeEscape,
		store.LikeJSONString("default-agent-pool-id", poolID)).Scan(&n)
	return n, err
}
