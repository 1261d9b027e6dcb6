// Package orchestration stores the resource-graph orchestrator's objects
// (projects, environment types, environments, resource types, providers,
// modules, module rules) per organization, serves them under
// /api/terrace/v1/orgs/{org}/…, and runs deployments: a manifest is
// compiled by package orchestrator into one Terraform configuration that
// is uploaded to the environment's workspace and applied by a run.
package orchestration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestrator"
	"github.com/terracehq/terrace/internal/store"
)

// Object kinds, as the API and CLI name them.
const (
	KindProject      = "project"
	KindEnvType      = "environment-type"
	KindEnvironment  = "environment"
	KindResourceType = "resource-type"
	KindProvider     = "provider"
	KindModule       = "module"
	KindModuleRule   = "module-rule"
)

// Kinds lists every object kind.
var Kinds = []string{KindProject, KindEnvType, KindEnvironment, KindResourceType, KindProvider, KindModule, KindModuleRule}

// Workspaces is what deployments need from the workspace domain.
type Workspaces interface {
	// Project returns the project an environment's workspace is created
	// in (the organization's default project).
	Project(ctx context.Context, org string) (string, error)
	// CheckCreate asks whether the caller may create a workspace in
	// project prj: nil, or the refusal Create would answer.
	CheckCreate(ctx context.Context, org, prj string) error
	// Create makes a remote-execution, auto-apply workspace in project
	// prj and returns its ID.
	Create(ctx context.Context, org, prj, name string) (string, error)
	// Delete deletes a workspace unless it still manages resources.
	Delete(ctx context.Context, id string) error
}

// Configs uploads a configuration to a workspace.
type Configs interface {
	CreateFromArchive(ctx context.Context, workspaceID string, tarGz []byte, speculative bool) (string, error)
}

// Runs starts and watches runs.
type Runs interface {
	// Create starts a run of cvID ("" = the workspace's current
	// configuration) with auto-apply; planOnly and destroy pick the kind.
	Create(ctx context.Context, workspaceID, cvID string, planOnly, destroy bool) (string, error)
	// Status reports a run's status, whether it is final, and whether it
	// ended well (applied, or planned with nothing to apply).
	Status(ctx context.Context, runID string) (status string, final, ok bool, err error)
}

// Outputs reads a workspace's current state outputs (name → JSON value).
type Outputs interface {
	Current(ctx context.Context, workspaceID string) (map[string]json.RawMessage, error)
}

// Service is the orchestrator's storage and deployment logic.
type Service struct {
	db         *store.DB
	Orgs       Organizations
	Workspaces Workspaces
	Configs    Configs
	Runs       Runs
	Outputs    Outputs
	Logger     *slog.Logger
	// PollEvery is how often a deployment checks its run (default 1s).
	PollEvery time.Duration

	wg       sync.WaitGroup
	stopping chan struct{}
	stopOnce sync.Once
}

// NewService returns a service over db; the composition root sets the
// other domains.
func NewService(db *store.DB) *Service {
	return &Service{db: db, Logger: slog.Default(), stopping: make(chan struct{})}
}

// Shutdown stops watching runs and waits for the background deployments
// to notice. Their deployments stay executing; the next read or deployment
// of the environment settles them from their runs.
func (s *Service) Shutdown() {
	s.stopOnce.Do(func() { close(s.stopping) })
	s.wg.Wait()
}

// Object is a stored object: its JSON body plus the store's metadata.
type Object struct {
	Kind      string
	Scope     string
	ID        string
	UUID      string
	VersionID string
	Body      json.RawMessage
	CreatedAt int64
	UpdatedAt int64
}

// MarshalJSON renders the body with uuid and timestamps added.
func (o *Object) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if err := json.Unmarshal(o.Body, &m); err != nil {
		return nil, err
	}
	m["uuid"] = o.UUID
	m["created_at"] = core.FromMicros(o.CreatedAt)
	m["updated_at"] = core.FromMicros(o.UpdatedAt)
	if o.VersionID != "" {
		m["version_id"] = o.VersionID
	}
	return json.Marshal(m)
}

// kind describes how one object kind is decoded, keyed and checked.
type kind struct {
	new func() any
	// key returns the scope and id of a decoded object.
	key func(v any) (scope, id string)
	// setKey writes the path's scope and id into the object.
	setKey func(v any, scope, id string)
}

var kinds = map[string]kind{
	KindProject: {
		new:    func() any { return &orchestrator.Project{} },
		key:    func(v any) (string, string) { return "", v.(*orchestrator.Project).ID },
		setKey: func(v any, _, id string) { v.(*orchestrator.Project).ID = id },
	},
	KindEnvType: {
		new:    func() any { return &orchestrator.EnvironmentType{} },
		key:    func(v any) (string, string) { return "", v.(*orchestrator.EnvironmentType).ID },
		setKey: func(v any, _, id string) { v.(*orchestrator.EnvironmentType).ID = id },
	},
	KindEnvironment: {
		new: func() any { return &orchestrator.Environment{} },
		key: func(v any) (string, string) {
			e := v.(*orchestrator.Environment)
			return e.ProjectID, e.ID
		},
		setKey: func(v any, scope, id string) {
			e := v.(*orchestrator.Environment)
			e.ProjectID, e.ID = scope, id
		},
	},
	KindResourceType: {
		new:    func() any { return &orchestrator.ResourceType{} },
		key:    func(v any) (string, string) { return "", v.(*orchestrator.ResourceType).ID },
		setKey: func(v any, _, id string) { v.(*orchestrator.ResourceType).ID = id },
	},
	KindProvider: {
		new: func() any { return &orchestrator.Provider{} },
		key: func(v any) (string, string) {
			p := v.(*orchestrator.Provider)
			return p.ProviderType, p.ID
		},
		setKey: func(v any, scope, id string) {
			p := v.(*orchestrator.Provider)
			p.ProviderType, p.ID = scope, id
		},
	},
	KindModule: {
		new:    func() any { return &orchestrator.Module{} },
		key:    func(v any) (string, string) { return "", v.(*orchestrator.Module).ID },
		setKey: func(v any, _, id string) { v.(*orchestrator.Module).ID = id },
	},
	KindModuleRule: {
		new:    func() any { return &orchestrator.ModuleRule{} },
		key:    func(v any) (string, string) { return "", v.(*orchestrator.ModuleRule).ID },
		setKey: func(v any, _, id string) { v.(*orchestrator.ModuleRule).ID = id },
	},
}

func kindOf(k string) (kind, error) {
	d, ok := kinds[k]
	if !ok {
		return kind{}, core.NotFound("unknown object kind %q", k)
	}
	return d, nil
}

// Organizations tells whether an organization exists (site admins pass
// auth.CheckOrganization for any name).
type Organizations interface {
	Exists(ctx context.Context, name string) error
}

// decode reads body strictly into the kind's struct, so that a misspelt
// field is an error that names it.
func decode(d kind, body []byte) (any, error) {
	v := d.new()
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			return nil, &orchestrator.ValidationError{Errors: []orchestrator.FieldError{{Field: strings.Trim(f, `"`), Detail: "is not a known field"}}}
		}
		var te *json.UnmarshalTypeError
		if ok := asTypeErr(err, &te); ok {
			return nil, &orchestrator.ValidationError{Errors: []orchestrator.FieldError{{Field: te.Field, Detail: fmt.Sprintf("must be a %s, not a %s", te.Type, te.Value)}}}
		}
		return nil, core.BadRequest("the body is not a JSON object: %v", err)
	}
	return v, nil
}

func validate(v any) error {
	return v.(interface{ Validate() error }).Validate()
}

// Create stores a new object. scope and id come from the path ("" when
// the path has none: the body's value is used); module rules get a uuid.
func (s *Service) Create(ctx context.Context, org, k, scope, id string, body []byte) (*Object, error) {
	if err := s.canWrite(ctx, org); err != nil {
		return nil, err
	}
	d, err := kindOf(k)
	if err != nil {
		return nil, err
	}
	v, err := decode(d, body)
	if err != nil {
		return nil, err
	}
	bs, bid := d.key(v)
	if scope == "" {
		scope = bs
	}
	if id == "" {
		id = bid
	}
	if k == KindModuleRule {
		id = core.NewID("rule")
	}
	d.setKey(v, scope, id)
	if err := validate(v); err != nil {
		return nil, err
	}
	var out *Object
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := s.checkRefs(ctx, tx, org, k, v, nil); err != nil {
			return err
		}
		o := &Object{Kind: k, Scope: scope, ID: id, UUID: core.NewID("uuid")}
		if k == KindModule {
			o.VersionID = core.NewID("mv")
			v.(*orchestrator.Module).VersionID = o.VersionID
		}
		o.Body, _ = json.Marshal(v)
		now := core.Micros(core.Now())
		o.CreatedAt, o.UpdatedAt = now, now
		if _, err := tx.Exec(ctx, `INSERT INTO orchestrator_objects (organization_name, kind, scope, id, uuid, version_id, tuple, body, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			org, k, scope, id, o.UUID, o.VersionID, tuple(k, v), string(o.Body), now, now); err != nil {
			if store.IsUniqueViolation(tx, err) {
				if k == KindModuleRule {
					return core.Conflict("a module rule with the same module, class, resource id, project, environment type and environment exists")
				}
				return core.Conflict("%s %q already exists", k, displayKey(scope, id))
			}
			return err
		}
		if k == KindModule {
			if _, err := tx.Exec(ctx, `INSERT INTO orchestrator_module_versions (organization_name, module_id, version_id, body, created_at) VALUES (?, ?, ?, ?, ?)`, org, id, o.VersionID, string(o.Body), now); err != nil {
				return err
			}
		}
		out = o
		return nil
	})
	return out, err
}

func displayKey(scope, id string) string {
	if scope == "" {
		return id
	}
	return scope + "/" + id
}

// tuple is a module rule's identity; other kinds have none.
func tuple(k string, v any) string {
	if k != KindModuleRule {
		return ""
	}
	r := v.(*orchestrator.ModuleRule)
	return strings.Join([]string{r.ModuleID, r.Class(), r.ResourceID, r.ProjectID, r.EnvTypeID, r.EnvID}, "|")
}

// Update replaces an object (module rules are immutable). A module gets a
// new version_id; an environment's type and a module's resource type
// cannot change.
func (s *Service) Update(ctx context.Context, org, k, scope, id string, body []byte) (*Object, error) {
	if err := s.canWrite(ctx, org); err != nil {
		return nil, err
	}
	d, err := kindOf(k)
	if err != nil {
		return nil, err
	}
	if k == KindModuleRule {
		if _, err := s.Get(ctx, org, k, scope, id); err != nil {
			return nil, err
		}
		return nil, core.Conflict("module rules are immutable: delete the rule and create a new one")
	}
	v, err := decode(d, body)
	if err != nil {
		return nil, err
	}
	d.setKey(v, scope, id)
	if err := validate(v); err != nil {
		return nil, err
	}
	var out *Object
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		old, err := getObject(ctx, tx, org, k, scope, id)
		if err != nil {
			return err
		}
		prev := d.new()
		_ = json.Unmarshal(old.Body, prev)
		if err := s.checkRefs(ctx, tx, org, k, v, prev); err != nil {
			return err
		}
		if k == KindModule {
			old.VersionID = core.NewID("mv")
			v.(*orchestrator.Module).VersionID = old.VersionID
		}
		old.Body, _ = json.Marshal(v)
		now := core.Micros(core.Now())
		old.UpdatedAt = now
		if _, err := tx.Exec(ctx, `UPDATE orchestrator_objects SET body = ?, version_id = ?, updated_at = ? WHERE organization_name = ? AND kind = ? AND scope = ? AND id = ?`,
			string(old.Body), old.VersionID, now, org, k, scope, id); err != nil {
			return err
		}
		if k == KindModule {
			if _, err := tx.Exec(ctx, `INSERT INTO orchestrator_module_versions (organization_name, module_id, version_id, body, created_at) VALUES (?, ?, ?, ?, ?)`, org, id, old.VersionID, string(old.Body), now); err != nil {
				return err
			}
		}
		out = old
		return nil
	})
	return out, err
}

// checkRefs checks what an object refers to; prev is the stored object on
// update (nil on create).
func (s *Service) checkRefs(ctx context.Context, q store.Q, org, k string, v, prev any) error {
	exists := func(kind, scope, id string) (bool, error) {
		_, err := getObject(ctx, q, org, kind, scope, id)
		if core.KindOf(err) == core.KindNotFound {
			return false, nil
		}
		return err == nil, err
	}
	var errs []orchestrator.FieldError
	need := func(field, kind, scope, id string) error {
		if id == "" {
			return nil
		}
		ok, err := exists(kind, scope, id)
		if err != nil {
			return err
		}
		if !ok {
			errs = append(errs, orchestrator.FieldError{Field: field, Detail: fmt.Sprintf("%s %q does not exist", kind, displayKey(scope, id))})
		}
		return nil
	}
	switch k {
	case KindEnvironment:
		e := v.(*orchestrator.Environment)
		if err := need("project_id", KindProject, "", e.ProjectID); err != nil {
			return err
		}
		if err := need("env_type_id", KindEnvType, "", e.EnvTypeID); err != nil {
			return err
		}
		if p, ok := prev.(*orchestrator.Environment); ok && p.EnvTypeID != e.EnvTypeID {
			errs = append(errs, orchestrator.FieldError{Field: "env_type_id", Detail: "cannot be changed"})
		}
	case KindModule:
		m := v.(*orchestrator.Module)
		if p, ok := prev.(*orchestrator.Module); ok && p.ResourceType != m.ResourceType {
			errs = append(errs, orchestrator.FieldError{Field: "resource_type", Detail: "cannot be changed"})
		}
		cat, err := s.catalogue(ctx, q, org)
		if err != nil {
			return err
		}
		if err := cat.CheckModule(m); err != nil {
			errs = append(errs, orchestrator.FieldErrors(err)...)
		}
	case KindModuleRule:
		r := v.(*orchestrator.ModuleRule)
		for _, c := range []struct{ field, kind, scope, id string }{
			{"module_id", KindModule, "", r.ModuleID},
			{"project_id", KindProject, "", r.ProjectID},
			{"env_type_id", KindEnvType, "", r.EnvTypeID},
			{"env_id", KindEnvironment, r.ProjectID, r.EnvID},
		} {
			if err := need(c.field, c.kind, c.scope, c.id); err != nil {
				return err
			}
		}
	}
	if len(errs) > 0 {
		return &orchestrator.ValidationError{Errors: errs}
	}
	return nil
}

// Get returns one object.
func (s *Service) Get(ctx context.Context, org, k, scope, id string) (*Object, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	if _, err := kindOf(k); err != nil {
		return nil, err
	}
	return getObject(ctx, s.db, org, k, scope, id)
}

func getObject(ctx context.Context, q store.Q, org, k, scope, id string) (*Object, error) {
	o := &Object{Kind: k, Scope: scope, ID: id}
	var body string
	err := q.QueryRow(ctx, `SELECT uuid, version_id, body, created_at, updated_at FROM orchestrator_objects WHERE organization_name = ? AND kind = ? AND scope = ? AND id = ?`,
		org, k, scope, id).Scan(&o.UUID, &o.VersionID, &body, &o.CreatedAt, &o.UpdatedAt)
	if store.IsNoRows(err) {
		return nil, core.NotFound("%s %q not found", k, displayKey(scope, id))
	}
	if err != nil {
		return nil, err
	}
	o.Body = json.RawMessage(body)
	return o, nil
}

// List returns a kind's objects (of one scope when scope is not "").
func (s *Service) List(ctx context.Context, org, k, scope string) ([]*Object, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	if _, err := kindOf(k); err != nil {
		return nil, err
	}
	return listObjects(ctx, s.db, org, k, scope)
}

func listObjects(ctx context.Context, q store.Q, org, k, scope string) ([]*Object, error) {
	query := `SELECT scope, id, uuid, version_id, body, created_at, updated_at FROM orchestrator_objects WHERE organization_name = ? AND kind = ?`
	args := []any{org, k}
	if scope != "" {
		query += ` AND scope = ?`
		args = append(args, scope)
	}
	rows, err := q.Query(ctx, query+` ORDER BY scope, id`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Object{}
	for rows.Next() {
		o := &Object{Kind: k}
		var body string
		if err := rows.Scan(&o.Scope, &o.ID, &o.UUID, &o.VersionID, &body, &o.CreatedAt, &o.UpdatedAt); err != nil {
			return nil, err
		}
		o.Body = json.RawMessage(body)
		out = append(out, o)
	}
	return out, rows.Err()
}

// ModuleVersions lists a module's versions, oldest first.
func (s *Service) ModuleVersions(ctx context.Context, org, id string) ([]json.RawMessage, error) {
	if _, err := s.Get(ctx, org, KindModule, "", id); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT body FROM orchestrator_module_versions WHERE organization_name = ? AND module_id = ? ORDER BY created_at, version_id`, org, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, json.RawMessage(b))
	}
	return out, rows.Err()
}

// Delete removes an object that nothing refers to. Deleting an
// environment deletes its workspace, which fails while the workspace still
// manages resources (destroy the environment first).
func (s *Service) Delete(ctx context.Context, org, k, scope, id string) error {
	if err := s.canWrite(ctx, org); err != nil {
		return err
	}
	if _, err := kindOf(k); err != nil {
		return err
	}
	var wsID string
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := getObject(ctx, tx, org, k, scope, id); err != nil {
			return err
		}
		if by, err := s.referrer(ctx, tx, org, k, scope, id); err != nil {
			return err
		} else if by != "" {
			return core.Conflict("%s %q is used by %s", k, displayKey(scope, id), by)
		}
		if k == KindEnvironment {
			if err := tx.QueryRow(ctx, `SELECT workspace_id FROM orchestrator_env_workspaces WHERE organization_name = ? AND project_id = ? AND env_id = ?`, org, scope, id).Scan(&wsID); err != nil && !store.IsNoRows(err) {
				return err
			}
			var busy int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND status = 'executing'`, org, scope, id).Scan(&busy); err != nil {
				return err
			}
			if busy > 0 {
				return core.Conflict("environment %q has a deployment in progress", displayKey(scope, id))
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if wsID != "" && s.Workspaces != nil {
		if err := s.Workspaces.Delete(ctx, wsID); err != nil && core.KindOf(err) != core.KindNotFound {
			return fmt.Errorf("deleting the environment's workspace: %w", err)
		}
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if k == KindEnvironment {
			// The check above ran in a transaction of its own (the
			// workspace's delete comes between): a deployment started
			// since would have had its row deleted while it ran (on
			// PostgreSQL, before 2026-11-30). The environment's row is
			// locked and its deployments counted again here, in the
			// transaction that deletes them: environment, then
			// deployments, the order Deploy takes (claimEnv), so a
			// deployment being stored is waited for and refuses the
			// delete, and one started after it finds no environment.
			if err := claimEnv(ctx, tx, org, scope, id); err != nil {
				return err
			}
			for _, q := range []string{
				`DELETE FROM orchestrator_env_workspaces WHERE organization_name = ? AND project_id = ? AND env_id = ?`,
				`DELETE FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ?`,
			} {
				if _, err := tx.Exec(ctx, q, org, scope, id); err != nil {
					return err
				}
			}
		}
		if k == KindModule {
			if _, err := tx.Exec(ctx, `DELETE FROM orchestrator_module_versions WHERE organization_name = ? AND module_id = ?`, org, id); err != nil {
				return err
			}
		}
		_, err := tx.Exec(ctx, `DELETE FROM orchestrator_objects WHERE organization_name = ? AND kind = ? AND scope = ? AND id = ?`, org, k, scope, id)
		return err
	})
}

// referrer names an object that refers to (k, scope, id), "" if none.
func (s *Service) referrer(ctx context.Context, q store.Q, org, k, scope, id string) (string, error) {
	type check struct {
		kind string
		uses func(body []byte, o *Object) bool
	}
	var checks []check
	env := func(f func(e *orchestrator.Environment) bool) func([]byte, *Object) bool {
		return func(b []byte, _ *Object) bool {
			var e orchestrator.Environment
			return json.Unmarshal(b, &e) == nil && f(&e)
		}
	}
	mod := func(f func(m *orchestrator.Module) bool) func([]byte, *Object) bool {
		return func(b []byte, _ *Object) bool {
			var m orchestrator.Module
			return json.Unmarshal(b, &m) == nil && f(&m)
		}
	}
	rule := func(f func(r *orchestrator.ModuleRule) bool) func([]byte, *Object) bool {
		return func(b []byte, _ *Object) bool {
			var r orchestrator.ModuleRule
			return json.Unmarshal(b, &r) == nil && f(&r)
		}
	}
	switch k {
	case KindProject:
		checks = append(checks,
			check{KindEnvironment, env(func(e *orchestrator.Environment) bool { return e.ProjectID == id })},
			check{KindModuleRule, rule(func(r *orchestrator.ModuleRule) bool { return r.ProjectID == id })})
	case KindEnvType:
		checks = append(checks,
			check{KindEnvironment, env(func(e *orchestrator.Environment) bool { return e.EnvTypeID == id })},
			check{KindModuleRule, rule(func(r *orchestrator.ModuleRule) bool { return r.EnvTypeID == id })})
	case KindEnvironment:
		checks = append(checks, check{KindModuleRule, rule(func(r *orchestrator.ModuleRule) bool { return r.ProjectID == scope && r.EnvID == id })})
	case KindResourceType:
		checks = append(checks, check{KindModule, mod(func(m *orchestrator.Module) bool {
			if m.ResourceType == id {
				return true
			}
			for _, d := range m.Dependencies {
				if d.Type == id {
					return true
				}
			}
			for _, c := range m.Coprovisioned {
				if c.Type == id {
					return true
				}
			}
			return false
		})})
	case KindProvider:
		ref := scope + "." + id
		checks = append(checks, check{KindModule, mod(func(m *orchestrator.Module) bool {
			for _, r := range m.ProviderMapping {
				if r == ref {
					return true
				}
			}
			return false
		})})
	case KindModule:
		checks = append(checks, check{KindModuleRule, rule(func(r *orchestrator.ModuleRule) bool { return r.ModuleID == id })})
	}
	for _, c := range checks {
		objs, err := listObjects(ctx, q, org, c.kind, "")
		if err != nil {
			return "", err
		}
		for _, o := range objs {
			if c.uses(o.Body, o) {
				return fmt.Sprintf("%s %q", c.kind, displayKey(o.Scope, o.ID)), nil
			}
		}
	}
	return "", nil
}

// catalogue loads the organization's resource types, modules, rules and
// providers.
func (s *Service) catalogue(ctx context.Context, q store.Q, org string) (*orchestrator.Catalogue, error) {
	cat := &orchestrator.Catalogue{}
	load := func(k string, add func(b []byte) error) error {
		objs, err := listObjects(ctx, q, org, k, "")
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := add(o.Body); err != nil {
				return fmt.Errorf("decoding stored %s %s: %w", k, o.ID, err)
			}
		}
		return nil
	}
	err := load(KindResourceType, func(b []byte) error {
		v := &orchestrator.ResourceType{}
		cat.ResourceTypes = append(cat.ResourceTypes, v)
		return unmarshalNumber(b, v)
	})
	if err == nil {
		err = load(KindModule, func(b []byte) error {
			v := &orchestrator.Module{}
			cat.Modules = append(cat.Modules, v)
			return unmarshalNumber(b, v)
		})
	}
	if err == nil {
		err = load(KindModuleRule, func(b []byte) error {
			v := &orchestrator.ModuleRule{}
			cat.Rules = append(cat.Rules, v)
			return unmarshalNumber(b, v)
		})
	}
	if err == nil {
		err = load(KindProvider, func(b []byte) error {
			v := &orchestrator.Provider{}
			cat.Providers = append(cat.Providers, v)
			return unmarshalNumber(b, v)
		})
	}
	sort.Slice(cat.Rules, func(i, j int) bool { return cat.Rules[i].ID < cat.Rules[j].ID })
	return cat, err
}

func unmarshalNumber(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	return dec.Decode(v)
}

func asTypeErr(err error, te **json.UnmarshalTypeError) bool { return errors.As(err, te) }
