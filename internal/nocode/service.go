package nocode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/variable"
	"github.com/terracehq/terrace/internal/workspace"
)

// Registry is what the no-code domain needs of the module registry.
type Registry interface {
	GetByID(ctx context.Context, id string) (*registry.Module, error)
	VersionVariables(ctx context.Context, org, name, provider, version string) ([]registry.Variable, error)
	ReadVersion(ctx context.Context, org, name, provider, version string) (*registry.Module, *registry.Version, error)
	VersionArchive(ctx context.Context, org, name, provider, version string) ([]byte, *registry.Version, error)
}

// Workspaces creates and finds workspaces.
type Workspaces interface {
	Create(ctx context.Context, org string, o workspace.Options) (*workspace.Workspace, error)
	Get(ctx context.Context, id string) (*workspace.Workspace, error)
	// Discard removes a workspace this request made and gives up on.
	Discard(ctx context.Context, id string) error
}

// Projects finds an organization's default project, where a workspace
// provisioned without a project goes.
type Projects interface {
	DefaultID(ctx context.Context, org string) (string, error)
}

// Variables sets workspace variables.
type Variables interface {
	ListWorkspaceVariables(ctx context.Context, workspaceID string) ([]*variable.Variable, error)
	CreateWorkspaceVariable(ctx context.Context, workspaceID string, opts variable.VarOptions) (*variable.Variable, error)
	UpdateWorkspaceVariable(ctx context.Context, workspaceID, id string, opts variable.VarOptions) (*variable.Variable, error)
}

// ConfigVersions uploads configurations.
type ConfigVersions interface {
	CreateFromArchive(ctx context.Context, workspaceID string, tarGz []byte, opts configversion.CreateOptions) (*configversion.ConfigurationVersion, error)
}

// Runs queues and reads runs.
type Runs interface {
	// Create queues a run the caller may start (the run domain asks the
	// model); CreateSystem one the caller's provisioning decided.
	Create(ctx context.Context, o run.CreateOptions) (*run.Run, error)
	CreateSystem(ctx context.Context, o run.CreateOptions) (*run.Run, error)
	Get(ctx context.Context, id string) (*run.Run, error)
}

// Service manages no-code modules, their workspaces and upgrades.
type Service struct {
	db         *store.DB
	Registry   Registry
	Workspaces Workspaces
	Projects   Projects
	Variables  Variables
	Configs    ConfigVersions
	Runs       Runs
	// BaseURL (https://host) makes plan URLs.
	BaseURL string
	Logger  *slog.Logger
}

// NewService returns a no-code service; the composition root sets the
// dependencies.
func NewService(db *store.DB) *Service { return &Service{db: db, Logger: slog.Default()} }

// refuseOrgToken refuses organization tokens when provisioning (HCP
// Terraform accepts only user and team tokens there; managing no-code
// modules asks the model, OrgManageNoCode).
func refuseOrgToken(ctx context.Context) error {
	if p := auth.FromContext(ctx); p != nil && p.Kind == auth.KindOrganization {
		return core.Forbidden("organization tokens cannot manage no-code modules or provision workspaces: use a user or team token")
	}
	return nil
}

func access(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return core.NotFound("organization %q not found", org)
		}
		return err
	}
	return nil
}

func manage(ctx context.Context, org string) error {
	if err := access(ctx, org); err != nil {
		return err
	}
	return authz.Allows(ctx, authz.OrgManageNoCode, authz.Resource{Organization: org})
}

// module returns the registry module, checking it is the org's private one.
func (s *Service) module(ctx context.Context, org, id string) (*registry.Module, error) {
	if id == "" {
		return nil, core.Invalid("registry-module relationship is required")
	}
	m, err := s.Registry.GetByID(ctx, id)
	if err != nil || m.Organization != org {
		return nil, core.NotFound("registry module %q not found in organization %q", id, org)
	}
	if m.RegistryName != registry.RegistryPrivate {
		return nil, core.Invalid("registry module %q is not in the private registry: no-code needs a private module with published versions", id)
	}
	return m, nil
}

// pinVariables checks a pin ("" follows the latest published version)
// and returns the version it currently means ("" when the module has no
// published version) with that version's variables; known is false when
// the variables cannot be known yet (no published version, or a pinned
// version whose archive is not uploaded), and then options are not checked.
func (s *Service) pinVariables(ctx context.Context, m *registry.Module, pin string) (effective string, vars []registry.Variable, known bool, err error) {
	if pin != "" {
		if err := registry.ValidVersion(pin); err != nil {
			return "", nil, false, core.Invalid("version-pin %q is not a semantic version", pin)
		}
		var st registry.VersionStatus
		found := false
		for _, v := range m.Versions {
			if v.Version == pin {
				found, st = true, v.Status
			}
		}
		if !found {
			return "", nil, false, core.Invalid("version-pin %q is not a version of registry module %s/%s", pin, m.Name, m.Provider)
		}
		if st != registry.VersionOK {
			return pin, nil, false, nil
		}
		effective = pin
	} else {
		_, v, err := s.Registry.ReadVersion(ctx, m.Organization, m.Name, m.Provider, "")
		if core.KindOf(err) == core.KindNotFound {
			return "", nil, false, nil
		}
		if err != nil {
			return "", nil, false, err
		}
		effective = v.Version
	}
	vars, err = s.Registry.VersionVariables(ctx, m.Organization, m.Name, m.Provider, effective)
	if core.KindOf(err) == core.KindNotFound {
		return effective, nil, false, nil
	}
	if err != nil {
		return "", nil, false, err
	}
	return effective, vars, true, nil
}

// effectivePin returns the published version a no-code module provisions.
func (s *Service) effectivePin(ctx context.Context, n *Module, m *registry.Module) (string, []registry.Variable, error) {
	v, vars, known, err := s.pinVariables(ctx, m, n.VersionPin)
	if err != nil {
		return "", nil, err
	}
	if !known {
		if n.VersionPin == "" {
			return "", nil, core.Invalid("registry module %s/%s has no published version to provision", m.Name, m.Provider)
		}
		return "", nil, core.Invalid("version %s of registry module %s/%s is not published (its archive is not uploaded)", n.VersionPin, m.Name, m.Provider)
	}
	return v, vars, nil
}

// checkOptions validates option sets against the pinned version's
// variables and gives each an ID (an existing one's when given and known).
func checkOptions(in []VariableOptionInput, vars []registry.Variable, known bool, existing []VariableOption) ([]VariableOption, error) {
	declared := map[string]registry.Variable{}
	for _, v := range vars {
		declared[v.Name] = v
	}
	ids := map[string]*VariableOption{}
	for i := range existing {
		ids[existing[i].ID] = &existing[i]
	}
	seen := map[string]bool{}
	out := []VariableOption{}
	for _, o := range in {
		if cur := ids[o.ID]; cur != nil && o.VariableName == "" && o.Options == nil {
			// Given by its id alone (go-tfe sends no attributes with an
			// id): the set is kept as it is.
			o = VariableOptionInput{ID: cur.ID, VariableName: cur.VariableName, VariableType: cur.VariableType, Options: cur.Options}
		}
		if o.VariableName == "" {
			return nil, core.Invalid("variable-options: variable-name is required")
		}
		v, ok := declared[o.VariableName]
		if !ok && known {
			return nil, core.Invalid("variable-options: the module does not declare a variable %q", o.VariableName)
		}
		if seen[o.VariableName] {
			return nil, core.Invalid("variable-options: variable %q is given twice", o.VariableName)
		}
		seen[o.VariableName] = true
		if len(o.Options) == 0 {
			return nil, core.Invalid("variable-options: options of variable %q must not be empty", o.VariableName)
		}
		id := o.ID
		if id != "" && ids[id] == nil {
			return nil, core.Invalid("variable-options: option set %q is not one of this no-code module's", id)
		}
		if id == "" {
			id = core.NewID(PrefixVariableOption)
		}
		typ := o.VariableType
		if typ == "" {
			typ = v.Type
		}
		if typ == "" {
			typ = "string"
		}
		out = append(out, VariableOption{ID: id, VariableName: o.VariableName, VariableType: typ, Options: slices.Clone(o.Options)})
	}
	return out, nil
}

func writeOptions(ctx context.Context, q store.Q, moduleID string, opts []VariableOption) error {
	if _, err := q.Exec(ctx, `DELETE FROM no_code_variable_options WHERE no_code_module_id = ?`, moduleID); err != nil {
		return err
	}
	for i, o := range opts {
		b, _ := json.Marshal(o.Options)
		if _, err := q.Exec(ctx, `INSERT INTO no_code_variable_options (id, no_code_module_id, variable_name, variable_type, options, position) VALUES (?, ?, ?, ?, ?, ?)`,
			o.ID, moduleID, o.VariableName, o.VariableType, string(b), i); err != nil {
			return err
		}
	}
	return nil
}

// Create enables no-code provisioning for a registry module.
func (s *Service) Create(ctx context.Context, org string, o CreateOptions) (*Module, error) {
	if err := manage(ctx, org); err != nil {
		return nil, err
	}
	m, err := s.module(ctx, org, o.RegistryModuleID)
	if err != nil {
		return nil, err
	}
	_, vars, known, err := s.pinVariables(ctx, m, o.VersionPin)
	if err != nil {
		return nil, err
	}
	pin := o.VersionPin
	opts, err := checkOptions(o.VariableOptions, vars, known, nil)
	if err != nil {
		return nil, err
	}
	now := core.Now()
	n := &Module{ID: core.NewID(PrefixModule), Organization: org, RegistryModuleID: m.ID, Enabled: o.Enabled == nil || *o.Enabled,
		VersionPin: pin, VariableOptions: opts, CreatedAt: now, UpdatedAt: now}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// The registry module's flag first: its write takes the registry
		// module's row before the no-code module's, the order the
		// registry's no-code flag update and Update take them. Inserted
		// first (before 2026-11-30), a create beside a flag update that
		// made the no-code module deadlocked on PostgreSQL, one aborted.
		if err := registry.SetNoCode(ctx, tx, m.ID, n.Enabled); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO no_code_modules (id, organization_name, registry_module_id, enabled, version_pin, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			n.ID, org, m.ID, n.Enabled, pin, core.Micros(now), core.Micros(now))
		if store.IsUniqueViolation(tx, err) {
			return core.Conflict("registry module %s/%s already has a no-code module", m.Name, m.Provider)
		}
		if err != nil {
			return err
		}
		return writeOptions(ctx, tx, n.ID, opts)
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

const moduleCols = `id, organization_name, registry_module_id, enabled, version_pin, created_at, updated_at`

func (s *Service) load(ctx context.Context, q store.Q, id string) (*Module, error) {
	if !core.HasPrefix(id, PrefixModule) {
		return nil, core.NotFound("no-code module %q not found", id)
	}
	var n Module
	var created, updated int64
	err := q.QueryRow(ctx, `SELECT `+moduleCols+` FROM no_code_modules WHERE id = ?`, id).
		Scan(&n.ID, &n.Organization, &n.RegistryModuleID, &n.Enabled, &n.VersionPin, &created, &updated)
	if store.IsNoRows(err) {
		return nil, core.NotFound("no-code module %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	n.CreatedAt, n.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	rows, err := q.Query(ctx, `SELECT id, variable_name, variable_type, options FROM no_code_variable_options WHERE no_code_module_id = ? ORDER BY position`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	n.VariableOptions = []VariableOption{}
	for rows.Next() {
		var o VariableOption
		var raw string
		if err := rows.Scan(&o.ID, &o.VariableName, &o.VariableType, &raw); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(raw), &o.Options); err != nil {
			return nil, fmt.Errorf("decoding options of %s: %w", o.ID, err)
		}
		n.VariableOptions = append(n.VariableOptions, o)
	}
	return &n, rows.Err()
}

// Get returns a no-code module the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Module, error) {
	n, err := s.load(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if access(ctx, n.Organization) != nil {
		return nil, core.NotFound("no-code module %q not found", id)
	}
	return n, nil
}

// errChanged: the no-code module changed between update's read and its
// transaction.
var errChanged = errors.New("the no-code module changed meanwhile")

// Update changes a no-code module. It decides from the module as read
// before its transaction (the options are checked against the registry
// there) and writes only if the transaction finds the module as read;
// when another update came between, it starts again from what that one
// left. Before (2026-11-30) it wrote regardless: two updates switching
// the registry module at once left the first's registry module marked
// no-code with no no-code module (on both stores).
func (s *Service) Update(ctx context.Context, id string, o UpdateOptions) (*Module, error) {
	for range 3 {
		n, err := s.update(ctx, id, o)
		if !errors.Is(err, errChanged) {
			return n, err
		}
	}
	return nil, core.Conflict("no-code module %s kept changing while it was updated; try again", id)
}

func (s *Service) update(ctx context.Context, id string, o UpdateOptions) (*Module, error) {
	n, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, n.Organization); err != nil {
		return nil, err
	}
	modID := n.RegistryModuleID
	if o.RegistryModuleID != "" {
		modID = o.RegistryModuleID
	}
	m, err := s.module(ctx, n.Organization, modID)
	if err != nil {
		return nil, err
	}
	pin := n.VersionPin
	if o.VersionPin != nil && *o.VersionPin != "" {
		pin = *o.VersionPin
	}
	_, vars, known, err := s.pinVariables(ctx, m, pin)
	if err != nil {
		return nil, err
	}
	opts := n.VariableOptions
	if o.VariableOptions != nil {
		opts, err = checkOptions(*o.VariableOptions, vars, known, n.VariableOptions)
	} else {
		// Kept options must still name declared variables of the new pin.
		in := make([]VariableOptionInput, len(opts))
		for i, x := range opts {
			in[i] = VariableOptionInput(x)
		}
		opts, err = checkOptions(in, vars, known, n.VariableOptions)
	}
	if err != nil {
		return nil, err
	}
	enabled := n.Enabled
	if o.Enabled != nil {
		enabled = *o.Enabled
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// Locked in the order the registry's no-code flag takes them
		// (registry.Service.Update, then SetModuleFlag): the registry
		// modules first, by ID, then the no-code module. Changed since it
		// was read (every write of it moves updated_at), it is read again.
		list, args := store.In([]string{n.RegistryModuleID, m.ID})
		if _, err := store.Strings(ctx, tx, `SELECT id FROM registry_modules WHERE id IN (`+list+`) ORDER BY id`+store.ForUpdate(tx), args...); err != nil {
			return err
		}
		var regID, curPin string
		var curEnabled bool
		var updated int64
		err := tx.QueryRow(ctx, `SELECT registry_module_id, enabled, version_pin, updated_at FROM no_code_modules WHERE id = ?`+store.ForUpdate(tx), n.ID).
			Scan(&regID, &curEnabled, &curPin, &updated)
		if store.IsNoRows(err) {
			return core.NotFound("no-code module %q not found", id)
		}
		if err != nil {
			return err
		}
		if regID != n.RegistryModuleID || curEnabled != n.Enabled || curPin != n.VersionPin || updated != core.Micros(n.UpdatedAt) {
			return errChanged
		}
		_, err = tx.Exec(ctx, `UPDATE no_code_modules SET registry_module_id = ?, enabled = ?, version_pin = ?, updated_at = ? WHERE id = ?`,
			m.ID, enabled, pin, core.Micros(core.Now()), n.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Conflict("registry module %s/%s already has a no-code module", m.Name, m.Provider)
		}
		if err != nil {
			return err
		}
		if err := writeOptions(ctx, tx, n.ID, opts); err != nil {
			return err
		}
		if m.ID != n.RegistryModuleID {
			if err := registry.SetNoCode(ctx, tx, n.RegistryModuleID, false); err != nil {
				return err
			}
		}
		return registry.SetNoCode(ctx, tx, m.ID, enabled)
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// Delete disables no-code provisioning for the module; workspaces created
// from it remain (they no longer get upgrades).
func (s *Service) Delete(ctx context.Context, id string) error {
	n, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := manage(ctx, n.Organization); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		for _, q := range []string{
			`DELETE FROM no_code_upgrades WHERE no_code_module_id = ?`,
			`DELETE FROM no_code_workspaces WHERE no_code_module_id = ?`,
			`DELETE FROM no_code_variable_options WHERE no_code_module_id = ?`,
			`DELETE FROM no_code_modules WHERE id = ?`,
		} {
			if _, err := tx.Exec(ctx, q, n.ID); err != nil {
				return err
			}
		}
		return registry.SetNoCode(ctx, tx, n.RegistryModuleID, false)
	})
}

// ModuleVariable is a registry module variable with its no-code options.
type ModuleVariable struct {
	registry.Variable
	Options []string
}

// ModuleVariables returns the variables a version of the module declares, with
// the options set for them (options belong to the pinned version).
func (s *Service) ModuleVariables(ctx context.Context, id, version string) ([]ModuleVariable, error) {
	n, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	m, err := s.Registry.GetByID(ctx, n.RegistryModuleID)
	if err != nil {
		return nil, err
	}
	vars, err := s.Registry.VersionVariables(ctx, m.Organization, m.Name, m.Provider, version)
	if err != nil {
		return nil, err
	}
	pin, _, _, _ := s.pinVariables(ctx, m, n.VersionPin)
	out := make([]ModuleVariable, len(vars))
	for i, v := range vars {
		out[i] = ModuleVariable{Variable: v, Options: []string{}}
		if version == pin {
			for _, o := range n.VariableOptions {
				if o.VariableName == v.Name {
					out[i].Options = o.Options
				}
			}
		}
	}
	return out, nil
}

// NoCodeModuleIDs maps registry module IDs to their no-code module IDs
// (the registry's no-code-modules relationship).
func (s *Service) NoCodeModuleIDs(ctx context.Context, moduleIDs []string) (map[string][]string, error) {
	out := map[string][]string{}
	if len(moduleIDs) == 0 {
		return out, nil
	}
	ph := make([]string, len(moduleIDs))
	args := make([]any, len(moduleIDs))
	for i, id := range moduleIDs {
		ph[i], args[i] = "?", id
	}
	rows, err := s.db.Query(ctx, `SELECT registry_module_id, id FROM no_code_modules WHERE registry_module_id IN (`+strings.Join(ph, ",")+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var mod, id string
		if err := rows.Scan(&mod, &id); err != nil {
			return nil, err
		}
		out[mod] = append(out[mod], id)
	}
	return out, rows.Err()
}

// NoCodeWorkspaceSQL says in SQL over a workspace's id written ws.id
// whether WorkspaceNoCode has anything to report (NULL: not).
func (s *Service) NoCodeWorkspaceSQL() string {
	return `SELECT 1 FROM no_code_workspaces WHERE workspace_id = ws.id`
}

// WorkspaceNoCode reports the registry module a workspace was provisioned
// from and whether its no-code module's pin has moved since.
func (s *Service) WorkspaceNoCode(ctx context.Context, workspaceID string) (string, bool) {
	var mod, version, pin string
	var enabled bool
	err := s.db.QueryRow(ctx, `SELECT w.registry_module_id, w.module_version, m.version_pin, m.enabled FROM no_code_workspaces w JOIN no_code_modules m ON m.id = w.no_code_module_id WHERE w.workspace_id = ?`, workspaceID).
		Scan(&mod, &version, &pin, &enabled)
	if err != nil {
		if !store.IsNoRows(err) {
			s.Logger.WarnContext(ctx, "reading a workspace's no-code module", "workspace", workspaceID, "error", err)
		}
		return "", false
	}
	if !enabled {
		return mod, false
	}
	if pin == "" {
		// Following the latest published version.
		m, err := s.Registry.GetByID(ctx, mod)
		if err != nil {
			return mod, false
		}
		_, v, err := s.Registry.ReadVersion(ctx, m.Organization, m.Name, m.Provider, "")
		if err != nil {
			return mod, false
		}
		pin = v.Version
	}
	return mod, pin != version
}

// checkVars validates workspace variables against the module's variables
// and options.
func checkVars(vars []Var, declared []registry.Variable, opts []VariableOption) error {
	decl := map[string]bool{}
	for _, v := range declared {
		decl[v.Name] = true
	}
	seen := map[string]bool{}
	for _, v := range vars {
		if v.Key == "" {
			return core.Invalid("vars: every variable needs a key")
		}
		if v.Category == "" {
			v.Category = string(variable.CategoryTerraform)
		}
		if v.Category != string(variable.CategoryTerraform) && v.Category != string(variable.CategoryEnv) {
			return core.Invalid("vars: category of %q must be terraform or env, not %q", v.Key, v.Category)
		}
		k := v.Category + "/" + v.Key
		if seen[k] {
			return core.Invalid("vars: variable %q is given twice", v.Key)
		}
		seen[k] = true
		if v.Category != string(variable.CategoryTerraform) {
			continue
		}
		if !decl[v.Key] {
			return core.Invalid("vars: the module does not declare a variable %q", v.Key)
		}
		for _, o := range opts {
			if o.VariableName == v.Key && !slices.Contains(o.Options, v.Value) {
				return core.Invalid("vars: %q is not an allowed value of variable %q (allowed: %s)", v.Value, v.Key, strings.Join(o.Options, ", "))
			}
		}
	}
	return nil
}

func varOptions(v Var) variable.VarOptions {
	cat := variable.Category(v.Category)
	if cat == "" {
		cat = variable.CategoryTerraform
	}
	o := variable.VarOptions{Key: &v.Key, Value: &v.Value, Category: &cat, HCL: &v.HCL, Sensitive: &v.Sensitive}
	if v.Description != "" {
		o.Description = &v.Description
	}
	return o
}

// provisionable returns an enabled no-code module and its registry module.
func (s *Service) provisionable(ctx context.Context, id string) (*Module, *registry.Module, error) {
	if err := refuseOrgToken(ctx); err != nil {
		return nil, nil, err
	}
	n, err := s.Get(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if !n.Enabled {
		return nil, nil, core.Invalid("no-code module %q is not enabled", id)
	}
	m, err := s.Registry.GetByID(ctx, n.RegistryModuleID)
	if err != nil {
		return nil, nil, err
	}
	return n, m, nil
}

// CreateWorkspace creates a workspace from the pinned version of a
// no-code module, sets its variables, uploads the module as its
// configuration and queues a run. On failure nothing remains.
func (s *Service) CreateWorkspace(ctx context.Context, id string, o WorkspaceOptions) (*workspace.Workspace, error) {
	n, m, err := s.provisionable(ctx, id)
	if err != nil {
		return nil, err
	}
	if o.Name == "" {
		return nil, core.Invalid("name is required")
	}
	if o.ExecutionMode != nil && *o.ExecutionMode == "agent" && (o.AgentPoolID == nil || *o.AgentPoolID == "") {
		return nil, core.Invalid("agent-pool-id is required when execution-mode is agent")
	}
	if o.ExecutionMode != nil && *o.ExecutionMode != "" && *o.ExecutionMode != "remote" && *o.ExecutionMode != "agent" {
		return nil, core.Invalid("execution-mode must be remote or agent, not %q", *o.ExecutionMode)
	}
	// The provision's decision, whoever calls (the API, the UI): in the
	// project named, else the organization's default, where the
	// workspace will go.
	projectID := o.ProjectID
	if projectID == "" {
		if projectID, err = s.Projects.DefaultID(ctx, n.Organization); err != nil {
			return nil, err
		}
	}
	if err := authz.Allows(ctx, authz.ProjectProvisionNoCode, authz.Resource{Organization: n.Organization, ProjectID: projectID}); err != nil {
		return nil, err
	}
	pin, declared, err := s.effectivePin(ctx, n, m)
	if err != nil {
		return nil, err
	}
	if err := checkVars(o.Vars, declared, n.VariableOptions); err != nil {
		return nil, err
	}
	archive, _, err := s.Registry.VersionArchive(ctx, m.Organization, m.Name, m.Provider, pin)
	if err != nil {
		return nil, err
	}
	wo := workspace.Options{Name: &o.Name, Description: o.Description, AutoApply: o.AutoApply, ExecutionMode: o.ExecutionMode,
		AgentPoolID: o.AgentPoolID, SourceName: o.SourceName, SourceURL: o.SourceURL, TerraformVersion: o.TerraformVersion}
	wo.ProjectID = &projectID
	if wo.SourceName == nil {
		src := m.Name
		wo.SourceName = &src
	}
	ws, err := s.Workspaces.Create(ctx, n.Organization, wo)
	if err != nil {
		return nil, err
	}
	undo := func(cause error) error {
		// Whether or not the caller may delete workspaces: the workspace
		// was made here, and manages nothing yet.
		if derr := s.Workspaces.Discard(context.WithoutCancel(ctx), ws.ID); derr != nil {
			s.Logger.ErrorContext(ctx, "removing a half-provisioned workspace", "workspace", ws.ID, "error", derr)
		}
		return cause
	}
	// The rest is the provision's own, decided with it (ProjectProvisionNoCode
	// above, and the workspace's creation just now): its
	// variables, configuration and first run are made as the organization,
	// so a provisioner who may create workspaces but not set variables or
	// queue runs (HCP Terraform's "create workspaces") provisions.
	sys := authz.AsPlatform(ctx, n.Organization)
	for _, v := range o.Vars {
		if _, err := s.Variables.CreateWorkspaceVariable(sys, ws.ID, varOptions(v)); err != nil {
			return nil, undo(err)
		}
	}
	if _, err := s.db.Exec(ctx, `INSERT INTO no_code_workspaces (workspace_id, no_code_module_id, registry_module_id, module_version, created_at) VALUES (?, ?, ?, ?, ?)`,
		ws.ID, n.ID, m.ID, pin, core.Micros(core.Now())); err != nil {
		return nil, undo(err)
	}
	f := false
	cv, err := s.Configs.CreateFromArchive(sys, ws.ID, archive, configversion.CreateOptions{AutoQueueRuns: &f, Source: "terraform+cloud"})
	if err != nil {
		return nil, undo(err)
	}
	msg := fmt.Sprintf("Triggered via no-code provisioning of %s/%s %s", m.Name, m.Provider, pin)
	if _, err := s.Runs.CreateSystem(sys, run.CreateOptions{WorkspaceID: ws.ID, ConfigurationVersionID: cv.ID, Message: &msg}); err != nil {
		return nil, undo(err)
	}
	return s.Workspaces.Get(ctx, ws.ID)
}

// provisioned returns the no-code module a workspace belongs to.
func (s *Service) provisioned(ctx context.Context, n *Module, workspaceID string) (string, error) {
	if _, err := s.Workspaces.Get(ctx, workspaceID); err != nil {
		return "", err
	}
	var version string
	err := s.db.QueryRow(ctx, `SELECT module_version FROM no_code_workspaces WHERE workspace_id = ? AND no_code_module_id = ?`, workspaceID, n.ID).Scan(&version)
	if store.IsNoRows(err) {
		return "", core.NotFound("workspace %s was not provisioned from no-code module %s", workspaceID, n.ID)
	}
	return version, err
}

// hclString renders s as an HCL string literal (for run variables).
func hclString(s string) string {
	b, _ := json.Marshal(s)
	out := strings.ReplaceAll(string(b), "${", "$${")
	return strings.ReplaceAll(out, "%{", "%%{")
}

// InitiateUpgrade plans the workspace with the module's pinned version and
// the given variables (a plan-only run); the workspace is unchanged until
// ConfirmUpgrade. Without a newer pin, it returns an Upgrade with only a
// Message.
func (s *Service) InitiateUpgrade(ctx context.Context, id, workspaceID string, vars []Var) (*Upgrade, error) {
	n, m, err := s.provisionable(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := manage(ctx, n.Organization); err != nil {
		return nil, err
	}
	current, err := s.provisioned(ctx, n, workspaceID)
	if err != nil {
		return nil, err
	}
	pin, declared, err := s.effectivePin(ctx, n, m)
	if err != nil {
		return nil, err
	}
	if current == pin && len(vars) == 0 {
		return &Upgrade{WorkspaceID: workspaceID, NoCodeModule: n.ID, ModuleVersion: current, Message: "No upgrade available: the workspace already uses version " + current}, nil
	}
	if err := checkVars(vars, declared, n.VariableOptions); err != nil {
		return nil, err
	}
	archive, _, err := s.Registry.VersionArchive(ctx, m.Organization, m.Name, m.Provider, pin)
	if err != nil {
		return nil, err
	}
	t, f := true, false
	cv, err := s.Configs.CreateFromArchive(ctx, workspaceID, archive, configversion.CreateOptions{AutoQueueRuns: &f, Speculative: &t, Source: "terraform+cloud"})
	if err != nil {
		return nil, err
	}
	var runVars []run.RunVar
	for _, v := range vars {
		if v.Category != "" && v.Category != string(variable.CategoryTerraform) {
			continue
		}
		val := v.Value
		if !v.HCL {
			val = hclString(v.Value)
		}
		runVars = append(runVars, run.RunVar{Key: v.Key, Value: val})
	}
	msg := fmt.Sprintf("No-code upgrade plan of %s/%s %s", m.Name, m.Provider, pin)
	r, err := s.Runs.Create(ctx, run.CreateOptions{WorkspaceID: workspaceID, ConfigurationVersionID: cv.ID, PlanOnly: &t, Message: &msg, Variables: runVars})
	if err != nil {
		return nil, err
	}
	vb, _ := json.Marshal(vars)
	if _, err := s.db.Exec(ctx, `INSERT INTO no_code_upgrades (run_id, workspace_id, no_code_module_id, module_version, vars, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, workspaceID, n.ID, pin, string(vb), core.Micros(core.Now())); err != nil {
		return nil, err
	}
	return s.upgradeOf(ctx, r, pin, n.ID), nil
}

func (s *Service) upgradeOf(ctx context.Context, r *run.Run, version, nocodeID string) *Upgrade {
	u := &Upgrade{RunID: r.ID, WorkspaceID: r.WorkspaceID, NoCodeModule: nocodeID, ModuleVersion: version, Status: string(r.Status)}
	if ws, err := s.Workspaces.Get(ctx, r.WorkspaceID); err == nil {
		u.PlanURL = s.BaseURL + "/app/" + url.PathEscape(ws.Organization) + "/workspaces/" + url.PathEscape(ws.Name) + "/runs/" + r.ID
	}
	return u
}

type upgradeRow struct {
	version, vars, applyRunID string
}

func (s *Service) upgrade(ctx context.Context, n *Module, workspaceID, runID string) (*upgradeRow, error) {
	var u upgradeRow
	err := s.db.QueryRow(ctx, `SELECT module_version, vars, apply_run_id FROM no_code_upgrades WHERE run_id = ? AND workspace_id = ? AND no_code_module_id = ?`, runID, workspaceID, n.ID).
		Scan(&u.version, &u.vars, &u.applyRunID)
	if store.IsNoRows(err) {
		return nil, core.NotFound("upgrade %s of workspace %s not found", runID, workspaceID)
	}
	return &u, err
}

// ReadUpgrade returns an upgrade; its status is its plan run's.
func (s *Service) ReadUpgrade(ctx context.Context, id, workspaceID, runID string) (*Upgrade, error) {
	n, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	u, err := s.upgrade(ctx, n, workspaceID, runID)
	if err != nil {
		return nil, err
	}
	r, err := s.Runs.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	return s.upgradeOf(ctx, r, u.version, n.ID), nil
}

// ConfirmUpgrade applies a planned upgrade: sets its variables on the
// workspace, uploads the version as the configuration and queues an
// auto-applied run, whose ID it returns.
func (s *Service) ConfirmUpgrade(ctx context.Context, id, workspaceID, runID string) (string, error) {
	n, m, err := s.provisionable(ctx, id)
	if err != nil {
		return "", err
	}
	if err := manage(ctx, n.Organization); err != nil {
		return "", err
	}
	u, err := s.upgrade(ctx, n, workspaceID, runID)
	if err != nil {
		return "", err
	}
	if u.applyRunID != "" {
		return "", core.Conflict("upgrade %s was already confirmed (run %s)", runID, u.applyRunID)
	}
	r, err := s.Runs.Get(ctx, runID)
	if err != nil {
		return "", err
	}
	if r.Status != run.PlannedAndFinished {
		return "", core.Conflict("upgrade %s cannot be confirmed: its plan is %s, not planned_and_finished", runID, r.Status)
	}
	// Claim the upgrade so that concurrent confirmations apply it once.
	res, err := s.db.Exec(ctx, `UPDATE no_code_upgrades SET apply_run_id = ? WHERE run_id = ? AND apply_run_id = ''`, claiming, runID)
	if err != nil {
		return "", err
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err != nil {
			return "", err
		}
		return "", core.Conflict("upgrade %s was already confirmed", runID)
	}
	applied := false
	defer func() {
		if !applied {
			if _, err := s.db.Exec(context.WithoutCancel(ctx), `UPDATE no_code_upgrades SET apply_run_id = '' WHERE run_id = ? AND apply_run_id = ?`, runID, claiming); err != nil {
				s.Logger.ErrorContext(ctx, "releasing a failed no-code upgrade confirmation", "run", runID, "error", err)
			}
		}
	}()
	var vars []Var
	if err := json.Unmarshal([]byte(u.vars), &vars); err != nil {
		return "", fmt.Errorf("decoding upgrade variables: %w", err)
	}
	existing, err := s.Variables.ListWorkspaceVariables(ctx, workspaceID)
	if err != nil {
		return "", err
	}
	for _, v := range vars {
		cat := v.Category
		if cat == "" {
			cat = string(variable.CategoryTerraform)
		}
		var found *variable.Variable
		for _, e := range existing {
			if e.Key == v.Key && string(e.Category) == cat {
				found = e
			}
		}
		if found != nil {
			_, err = s.Variables.UpdateWorkspaceVariable(ctx, workspaceID, found.ID, varOptions(v))
		} else {
			_, err = s.Variables.CreateWorkspaceVariable(ctx, workspaceID, varOptions(v))
		}
		if err != nil {
			return "", err
		}
	}
	archive, _, err := s.Registry.VersionArchive(ctx, m.Organization, m.Name, m.Provider, u.version)
	if err != nil {
		return "", err
	}
	f, t := false, true
	cv, err := s.Configs.CreateFromArchive(ctx, workspaceID, archive, configversion.CreateOptions{AutoQueueRuns: &f, Source: "terraform+cloud"})
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("No-code upgrade of %s/%s to %s", m.Name, m.Provider, u.version)
	ar, err := s.Runs.Create(ctx, run.CreateOptions{WorkspaceID: workspaceID, ConfigurationVersionID: cv.ID, AutoApply: &t, Message: &msg})
	if err != nil {
		return "", err
	}
	applied = true // the run exists: never confirm twice
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		// The variables are on the workspace now: forget them here.
		if _, err := tx.Exec(ctx, `UPDATE no_code_upgrades SET apply_run_id = ?, vars = '[]' WHERE run_id = ?`, ar.ID, runID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE no_code_workspaces SET module_version = ? WHERE workspace_id = ?`, u.version, workspaceID)
		return err
	})
	return ar.ID, err
}

// claiming marks an upgrade whose confirmation is in progress.
const claiming = "claiming"

// WorkspaceModule returns the no-code module a workspace was provisioned
// from.
func (s *Service) WorkspaceModule(ctx context.Context, workspaceID string) (string, error) {
	if _, err := s.Workspaces.Get(ctx, workspaceID); err != nil {
		return "", err
	}
	var id string
	err := s.db.QueryRow(ctx, `SELECT no_code_module_id FROM no_code_workspaces WHERE workspace_id = ?`, workspaceID).Scan(&id)
	if store.IsNoRows(err) {
		return "", core.NotFound("workspace %s was not provisioned from a no-code module", workspaceID)
	}
	return id, err
}

// SetModuleFlag follows the registry module's deprecated no-code attribute:
// true enables the module's no-code module (creating one that follows the
// latest version when there is none), false disables it.
func SetModuleFlag(ctx context.Context, q store.Q, m *registry.Module, enabled bool) error {
	now := core.Micros(core.Now())
	res, err := q.Exec(ctx, `UPDATE no_code_modules SET enabled = ?, updated_at = ? WHERE registry_module_id = ?`, enabled, now, m.ID)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 || !enabled {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO no_code_modules (id, organization_name, registry_module_id, enabled, version_pin, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		core.NewID(PrefixModule), m.Organization, m.ID, true, "", now, now)
	return err
}
