package orchestration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestrator"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
)

// Deployment modes.
const (
	ModeDeploy   = "deploy"
	ModePlanOnly = "plan_only"
	ModeDestroy  = "destroy"
	// ModeRollback deploys a past deployment's manifest with the module
	// versions its graph used (provider configuration stays current).
	ModeRollback = "rollback"
)

// stateModes are the modes that change an environment's resources.
const stateModes = `('deploy', 'destroy', 'rollback')`

// Deployment statuses.
const (
	StatusExecuting = "executing"
	StatusSucceeded = "succeeded"
	StatusFailed    = "failed"
)

// DeployRequest is the body of POST /orgs/{org}/deployments.
type DeployRequest struct {
	ProjectID string                 `json:"project_id"`
	EnvID     string                 `json:"env_id"`
	Mode      string                 `json:"mode,omitempty"` // deploy (default), plan_only, destroy, rollback
	Manifest  *orchestrator.Manifest `json:"manifest,omitempty"`
	IsDryRun  bool                   `json:"is_dry_run,omitempty"`
	// RollbackToDeploymentID is the past deployment a rollback returns to.
	RollbackToDeploymentID string `json:"rollback_to_deployment_id,omitempty"`
	// IdempotencyKey (or the Idempotency-Key header) makes a retried
	// request return the deployment the first one made; the same key with
	// another mode, manifest or rollback target is a conflict.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// Deployment is one deploy, plan-only or destroy of an environment.
type Deployment struct {
	ID            string                 `json:"id"`
	ProjectID     string                 `json:"project_id"`
	EnvID         string                 `json:"env_id"`
	Mode          string                 `json:"mode"`
	Status        string                 `json:"status"`
	StatusMessage string                 `json:"status_message,omitempty"`
	Manifest      *orchestrator.Manifest `json:"manifest,omitempty"`
	Diff          []orchestrator.Change  `json:"diff"`
	WorkspaceID   string                 `json:"workspace_id,omitempty"`
	RunID         string                 `json:"run_id,omitempty"`
	CreatedBy     string                 `json:"created_by,omitempty"`
	RollbackOf    string                 `json:"rollback_to_deployment_id,omitempty"`
	CreatedAt     time.Time              `json:"created_at"`
	UpdatedAt     time.Time              `json:"updated_at"`
	state         []orchestrator.NodeState
	providers     []string
	view          graphView
	files         map[string]string
	idemKey       string
}

// graphView is a deployment's graph as stored for reading back: the graph
// as the CLI draws it, the Mermaid chart, and the sensitive outputs.
type graphView struct {
	Graph     orchestrator.GraphJSON   `json:"graph"`
	Mermaid   string                   `json:"mermaid"`
	Sensitive orchestrator.Sensitivity `json:"sensitive"`
}

// DryRun is the answer to a dry run: nothing is stored.
type DryRun struct {
	IsDryRun  bool                   `json:"is_dry_run"`
	Graph     orchestrator.GraphJSON `json:"graph"`
	Mermaid   string                 `json:"mermaid"`
	Diff      []orchestrator.Change  `json:"diff"`
	Terraform map[string]string      `json:"terraform"`
}

// CompileFailure is a compile error with its per-node errors, for the API.
type CompileFailure struct {
	Errors []orchestrator.NodeError
	Graph  *orchestrator.Graph
}

// environment loads an environment and its type.
func (s *Service) environment(ctx context.Context, org, project, env string) (*orchestrator.Environment, error) {
	o, err := getObject(ctx, s.db, org, KindEnvironment, project, env)
	if err != nil {
		return nil, err
	}
	e := &orchestrator.Environment{}
	return e, json.Unmarshal(o.Body, e)
}

// lastState returns the graph state and providers of the environment's
// last succeeded deploy or destroy, plus the providers of any deployment
// attempted since (a failed apply may have created resources).
func (s *Service) lastState(ctx context.Context, org, project, env string) ([]orchestrator.NodeState, []string, error) {
	rows, err := s.db.Query(ctx, `SELECT status, graph, providers FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND mode IN `+stateModes+` ORDER BY created_at DESC, id DESC`, org, project, env)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var state []orchestrator.NodeState
	provSet := map[string]bool{}
	for rows.Next() {
		var status, graph, provs string
		if err := rows.Scan(&status, &graph, &provs); err != nil {
			return nil, nil, err
		}
		var ps []string
		_ = json.Unmarshal([]byte(provs), &ps)
		for _, p := range ps {
			provSet[p] = true
		}
		if status == StatusSucceeded {
			if err := unmarshalNumber([]byte(graph), &state); err != nil {
				return nil, nil, err
			}
			break
		}
	}
	var provs []string
	for p := range provSet {
		provs = append(provs, p)
	}
	return state, provs, rows.Err()
}

// Deploy compiles the manifest for the environment. A dry run returns a
// *DryRun and stores nothing; otherwise the deployment is stored as
// executing and carried out in the background (poll Deployment). A
// rollback compiles a past deployment's manifest with the module versions
// its graph used.
func (s *Service) Deploy(ctx context.Context, org string, req DeployRequest) (any, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	if req.Mode == "" {
		req.Mode = ModeDeploy
	}
	var fe []orchestrator.FieldError
	switch req.Mode {
	case ModeDeploy, ModePlanOnly:
		if req.Manifest == nil {
			fe = append(fe, orchestrator.FieldError{Field: "manifest", Detail: "is required"})
		}
	case ModeRollback:
		if req.RollbackToDeploymentID == "" {
			fe = append(fe, orchestrator.FieldError{Field: "rollback_to_deployment_id", Detail: "is required for a rollback"})
		}
		if req.Manifest != nil {
			fe = append(fe, orchestrator.FieldError{Field: "manifest", Detail: "must not be set for a rollback (the past deployment's manifest is used)"})
		}
	case ModeDestroy:
	default:
		fe = append(fe, orchestrator.FieldError{Field: "mode", Detail: fmt.Sprintf("must be deploy, plan_only, destroy or rollback (got %q)", req.Mode)})
	}
	if req.Mode != ModeRollback && req.RollbackToDeploymentID != "" {
		fe = append(fe, orchestrator.FieldError{Field: "rollback_to_deployment_id", Detail: "is only for mode rollback"})
	}
	if req.ProjectID == "" {
		fe = append(fe, orchestrator.FieldError{Field: "project_id", Detail: "is required"})
	}
	if req.EnvID == "" {
		fe = append(fe, orchestrator.FieldError{Field: "env_id", Detail: "is required"})
	}
	if len(req.IdempotencyKey) > 255 {
		fe = append(fe, orchestrator.FieldError{Field: "idempotency_key", Detail: "must be at most 255 characters"})
	}
	if len(fe) > 0 {
		return nil, &orchestrator.ValidationError{Errors: fe}
	}
	env, err := s.environment(ctx, org, req.ProjectID, req.EnvID)
	if err != nil {
		return nil, err
	}
	if err := s.allowDeploy(ctx, org, req); err != nil {
		return nil, err
	}
	var target *Deployment
	var pinned map[string]string // module id → version of the rollback target's graph
	if req.Mode == ModeRollback {
		if target, err = s.loadDeployment(ctx, org, req.RollbackToDeploymentID); err != nil {
			return nil, err
		}
		if err := s.allowDeployment(ctx, org, target, authz.RunRead); err != nil {
			return nil, err
		}
		switch {
		case target.ProjectID != req.ProjectID || target.EnvID != req.EnvID:
			return nil, &orchestrator.ValidationError{Errors: []orchestrator.FieldError{{Field: "rollback_to_deployment_id",
				Detail: fmt.Sprintf("deployment %s belongs to environment %s/%s, not %s/%s", target.ID, target.ProjectID, target.EnvID, req.ProjectID, req.EnvID)}}}
		case target.Mode != ModeDeploy && target.Mode != ModeRollback:
			return nil, &orchestrator.ValidationError{Errors: []orchestrator.FieldError{{Field: "rollback_to_deployment_id",
				Detail: fmt.Sprintf("deployment %s is a %s; only a deploy or rollback can be returned to", target.ID, target.Mode)}}}
		case target.Status != StatusSucceeded:
			return nil, &orchestrator.ValidationError{Errors: []orchestrator.FieldError{{Field: "rollback_to_deployment_id",
				Detail: fmt.Sprintf("deployment %s %s; only a succeeded deployment can be returned to", target.ID, target.Status)}}}
		}
		req.Manifest = target.Manifest
		pinned = map[string]string{}
		for _, n := range target.state {
			if n.Module != "" && n.ModuleVersion != "" {
				pinned[n.Module] = n.ModuleVersion
			}
		}
	}
	d := &Deployment{ID: core.NewID("dep"), ProjectID: req.ProjectID, EnvID: req.EnvID, Mode: req.Mode, Status: StatusExecuting,
		Manifest: req.Manifest, CreatedBy: caller(ctx), RollbackOf: req.RollbackToDeploymentID, files: map[string]string{}}
	if req.IdempotencyKey != "" && !req.IsDryRun {
		sum := sha256.Sum256([]byte(req.IdempotencyKey))
		d.idemKey = hex.EncodeToString(sum[:])
		if prev, err := s.idempotent(ctx, org, d); prev != nil || err != nil {
			return prev, err
		}
	}
	prev, prevProviders, err := s.lastState(ctx, org, req.ProjectID, req.EnvID)
	if err != nil {
		return nil, err
	}
	var files map[string][]byte
	if req.Mode == ModeDestroy {
		d.Manifest = &orchestrator.Manifest{}
		d.state = []orchestrator.NodeState{}
		d.Diff = orchestrator.Diff(prev, nil)
		d.providers = prevProviders
		d.view = graphView{Graph: orchestrator.GraphJSON{Nodes: []orchestrator.NodeJSON{}, Edges: []orchestrator.EdgeJSON{}}}
	} else {
		if err := req.Manifest.Validate(); err != nil {
			return nil, prefixFields(err, "manifest.")
		}
		cat, err := s.catalogue(ctx, s.db, org)
		if err != nil {
			return nil, err
		}
		if err := s.pin(ctx, org, cat, pinned); err != nil {
			return nil, err
		}
		mountedInterfaces(cat)
		g, err := orchestrator.Compile(cat, orchestrator.Context{OrgID: org, ProjectID: env.ProjectID, EnvID: env.ID, EnvTypeID: env.EnvTypeID}, req.Manifest)
		if err != nil {
			var ce *orchestrator.CompileError
			if errors.As(err, &ce) {
				return nil, &CompileFailure{Errors: ce.Errors, Graph: g}
			}
			var ve *orchestrator.ValidationError
			if errors.As(err, &ve) {
				return nil, prefixFields(err, "manifest.")
			}
			return nil, err
		}
		g.KeepProviders(prevProviders)
		if files, err = g.Terraform(); err != nil {
			return nil, core.Invalid("%v", err)
		}
		for k, v := range files {
			d.files[k] = string(v)
		}
		d.state = g.State()
		d.Diff = orchestrator.Diff(prev, d.state)
		d.providers = g.ProviderRefs()
		d.view = graphView{Graph: g.JSON(), Mermaid: g.Mermaid(), Sensitive: g.Sensitive(cat)}
		if req.IsDryRun {
			return &DryRun{IsDryRun: true, Graph: d.view.Graph, Mermaid: d.view.Mermaid, Diff: nonNil(d.Diff), Terraform: d.files}, nil
		}
	}
	if req.IsDryRun {
		return &DryRun{IsDryRun: true, Graph: orchestrator.GraphJSON{}, Diff: nonNil(d.Diff)}, nil
	}
	if s.Workspaces == nil || s.Configs == nil || s.Runs == nil {
		return nil, core.Conflict("deployments are not available on this server")
	}
	d.Diff = nonNil(d.Diff)
	now := core.Now()
	d.CreatedAt, d.UpdatedAt = now, now
	manifest, _ := json.Marshal(d.Manifest)
	graph, _ := json.Marshal(d.state)
	provs, _ := json.Marshal(nonNil(d.providers))
	diff, _ := json.Marshal(d.Diff)
	view, _ := json.Marshal(d.view)
	tf, _ := json.Marshal(d.files)
	if err := s.settleStale(ctx, org, d.ProjectID, d.EnvID); err != nil {
		return nil, err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if err := claimEnv(ctx, tx, org, d.ProjectID, d.EnvID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO orchestrator_deployments (id, organization_name, project_id, env_id, mode, status, manifest, graph, providers, diff, created_by, graph_view, terraform, rollback_of, idempotency_key, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			d.ID, org, d.ProjectID, d.EnvID, d.Mode, d.Status, string(manifest), string(graph), string(provs), string(diff), d.CreatedBy, string(view), string(tf), d.RollbackOf, d.idemKey, core.Micros(now), core.Micros(now))
		return err
	})
	if err != nil {
		if d.idemKey != "" {
			// A concurrent request with the same key won the insert.
			if prev, perr := s.idempotent(ctx, org, d); prev != nil || perr != nil {
				return prev, perr
			}
		}
		return nil, err
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		bg := context.WithoutCancel(ctx)
		err := s.execute(bg, org, d, files)
		if errors.Is(err, errShutdown) {
			return // settled from the run later (settleStale)
		}
		status, msg := StatusSucceeded, ""
		if err != nil {
			status, msg = StatusFailed, err.Error()
			s.Logger.Warn("deployment failed", "deployment", d.ID, "error", err)
		}
		if _, uerr := s.db.Exec(bg, `UPDATE orchestrator_deployments SET status = ?, status_message = ?, workspace_id = ?, run_id = ?, updated_at = ? WHERE id = ?`,
			status, msg, d.WorkspaceID, d.RunID, core.Micros(core.Now()), d.ID); uerr != nil {
			s.Logger.Error("recording a deployment's end", "deployment", d.ID, "error", uerr)
		}
	}()
	return d, nil
}

// claimEnv makes sure, in the transaction that then inserts a deployment
// (or deletes the environment), that no deployment of the environment is
// executing. The environment's row is locked first: on PostgreSQL two deployments counting at once
// both counted none and both ran (before 2026-11-30); the second now
// waits for the first's insert and counts it. Rows are locked environment
// first, then deployments; nothing takes them the other way round (the
// end of a deployment and settleStale write only its row, Update of an
// environment only the environment's, and Delete of an environment
// claims it too before it deletes its deployments and then it).
func claimEnv(ctx context.Context, tx *store.Tx, org, project, env string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM orchestrator_objects WHERE organization_name = ? AND kind = ? AND scope = ? AND id = ?`+store.ForUpdate(tx),
		org, KindEnvironment, project, env).Scan(&one)
	if store.IsNoRows(err) {
		return core.NotFound("%s %q not found", KindEnvironment, displayKey(project, env))
	}
	if err != nil {
		return err
	}
	var busy int
	if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND status = ?`, org, project, env, StatusExecuting).Scan(&busy); err != nil {
		return err
	}
	if busy > 0 {
		return core.Conflict("environment %s/%s has a deployment in progress", project, env)
	}
	return nil
}

// caller names who makes a deployment: a user's name, or the kind of
// token.
func caller(ctx context.Context) string {
	p := auth.FromContext(ctx)
	switch {
	case p == nil:
		return ""
	case p.Username != "":
		return p.Username
	case p.TeamID != "":
		return "team:" + p.TeamID
	}
	return string(p.Kind)
}

// idempotent returns the deployment an earlier request with d's key made,
// or a conflict when that request asked for something else; nil, nil when
// the key is new.
func (s *Service) idempotent(ctx context.Context, org string, d *Deployment) (*Deployment, error) {
	var id, mode, manifest, rollbackOf string
	err := s.db.QueryRow(ctx, `SELECT id, mode, manifest, rollback_of FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND idempotency_key = ?`,
		org, d.ProjectID, d.EnvID, d.idemKey).Scan(&id, &mode, &manifest, &rollbackOf)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	want, _ := json.Marshal(d.Manifest)
	if d.Mode == ModeDestroy {
		want, _ = json.Marshal(&orchestrator.Manifest{})
	}
	var a, b any
	_ = json.Unmarshal([]byte(manifest), &a)
	_ = json.Unmarshal(want, &b)
	if mode != d.Mode || rollbackOf != d.RollbackOf || !reflect.DeepEqual(a, b) {
		return nil, core.Conflict("idempotency key already used by deployment %s with a different mode, manifest or rollback target", id)
	}
	return s.GetDeployment(ctx, org, id)
}

// pin replaces the catalogue's modules by the versions a rollback target's
// graph used (kept in orchestrator_module_versions), so the rollback runs
// the same code even if the modules were updated or deleted since.
func (s *Service) pin(ctx context.Context, org string, cat *orchestrator.Catalogue, pinned map[string]string) error {
	for _, id := range sortedMapKeys(pinned) {
		var body string
		err := s.db.QueryRow(ctx, `SELECT body FROM orchestrator_module_versions WHERE organization_name = ? AND module_id = ? AND version_id = ?`, org, id, pinned[id]).Scan(&body)
		if store.IsNoRows(err) {
			return core.Conflict("module %s version %s of the rollback target is no longer stored", id, pinned[id])
		}
		if err != nil {
			return err
		}
		m := &orchestrator.Module{}
		if err := unmarshalNumber([]byte(body), m); err != nil {
			return fmt.Errorf("decoding module %s version %s: %w", id, pinned[id], err)
		}
		m.VersionID = pinned[id]
		found := false
		for i, x := range cat.Modules {
			if x.ID == id {
				cat.Modules[i], found = m, true
			}
		}
		if !found {
			cat.Modules = append(cat.Modules, m)
		}
	}
	return nil
}

// mountedInterfaces reads the variables and sensitive outputs of modules
// whose source is a mounted path readable here (the in-process runner
// reads the same path), so the compiler can check their variables too.
func mountedInterfaces(cat *orchestrator.Catalogue) {
	for _, m := range cat.Modules {
		if !strings.HasPrefix(m.ModuleSource, "/") {
			continue
		}
		matches, _ := filepath.Glob(filepath.Join(m.ModuleSource, "*.tf"))
		files := map[string][]byte{}
		for _, f := range matches {
			if b, err := os.ReadFile(f); err == nil {
				files[f] = b
			}
		}
		if len(files) == 0 {
			continue
		}
		if mi := orchestrator.ParseInterface(files); mi != nil {
			if cat.Interfaces == nil {
				cat.Interfaces = map[string]*orchestrator.ModuleInterface{}
			}
			cat.Interfaces[m.ModuleSource] = mi
		}
	}
}

func sortedMapKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func prefixFields(err error, prefix string) error {
	fe := orchestrator.FieldErrors(err)
	if fe == nil {
		return err
	}
	out := make([]orchestrator.FieldError, len(fe))
	for i, f := range fe {
		out[i] = orchestrator.FieldError{Field: prefix + f.Field, Detail: f.Detail}
	}
	return &orchestrator.ValidationError{Errors: out}
}

func (c *CompileFailure) Error() string {
	return (&orchestrator.CompileError{Errors: c.Errors}).Error()
}

// Unwrap makes the failure a 422.
func (c *CompileFailure) Unwrap() error {
	return &core.Error{Kind: core.KindInvalid, Detail: c.Error()}
}

// execute carries out a stored deployment: it finds or creates the
// environment's workspace, uploads the configuration and runs it.
func (s *Service) execute(ctx context.Context, org string, d *Deployment, files map[string][]byte) error {
	var wsID string
	err := s.db.QueryRow(ctx, `SELECT workspace_id FROM orchestrator_env_workspaces WHERE organization_name = ? AND project_id = ? AND env_id = ?`, org, d.ProjectID, d.EnvID).Scan(&wsID)
	switch {
	case store.IsNoRows(err) && d.Mode == ModeDestroy:
		return nil // never deployed: nothing to destroy
	case store.IsNoRows(err):
		prj, err := s.Workspaces.Project(ctx, org)
		if err != nil {
			return fmt.Errorf("finding the project of the environment's workspace: %w", err)
		}
		if wsID, err = s.Workspaces.Create(ctx, org, prj, d.ProjectID+"-"+d.EnvID); err != nil {
			return fmt.Errorf("creating the environment's workspace: %w", err)
		}
		if _, err := s.db.Exec(ctx, `INSERT INTO orchestrator_env_workspaces (organization_name, project_id, env_id, workspace_id) VALUES (?, ?, ?, ?)`, org, d.ProjectID, d.EnvID, wsID); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	d.WorkspaceID = wsID
	// Deploy asked already; asked again of the workspace the run goes
	// into, which another deployment may have created since.
	if err := authz.Allows(ctx, runAction(d.Mode), authz.Resource{Organization: org, WorkspaceID: wsID}); err != nil {
		return fmt.Errorf("starting the run: %w", err)
	}
	cvID := ""
	if d.Mode != ModeDestroy {
		dir, err := os.MkdirTemp("", "terrace-deploy-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		for _, rel := range sortedFileNames(files) {
			if err := writeFile(dir, rel, files[rel]); err != nil {
				return err
			}
		}
		tgz, err := slug.Pack(dir)
		if err != nil {
			return fmt.Errorf("packing the configuration: %w", err)
		}
		if cvID, err = s.Configs.CreateFromArchive(ctx, wsID, tgz, d.Mode == ModePlanOnly); err != nil {
			return fmt.Errorf("uploading the configuration: %w", err)
		}
	}
	runID, err := s.Runs.Create(ctx, wsID, cvID, d.Mode == ModePlanOnly, d.Mode == ModeDestroy)
	if err != nil {
		return fmt.Errorf("starting the run: %w", err)
	}
	d.RunID = runID
	if _, err := s.db.Exec(ctx, `UPDATE orchestrator_deployments SET workspace_id = ?, run_id = ?, updated_at = ? WHERE id = ?`, wsID, runID, core.Micros(core.Now()), d.ID); err != nil {
		return err
	}
	for {
		status, final, ok, err := s.Runs.Status(ctx, runID)
		if err != nil {
			return err
		}
		if final {
			if !ok {
				return fmt.Errorf("run %s ended %s", runID, status)
			}
			return nil
		}
		every := s.PollEvery
		if every <= 0 {
			every = time.Second
		}
		select {
		case <-time.After(every):
		case <-s.stopping:
			return errShutdown
		}
	}
}

var errShutdown = errors.New("the server is shutting down")

// GetDeployment returns one deployment. One still executing whose run has
// ended (its server process stopped watching) is settled first.
func (s *Service) GetDeployment(ctx context.Context, org, id string) (*Deployment, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	for settled := false; ; settled = true {
		ds, err := s.deployments(ctx, org, `id = ?`, id)
		if err != nil {
			return nil, err
		}
		if len(ds) == 0 {
			return nil, core.NotFound("deployment %s not found", id)
		}
		d := ds[0]
		if err := s.allowDeployment(ctx, org, d, authz.RunRead); err != nil {
			return nil, err
		}
		if settled || d.Status != StatusExecuting || d.RunID == "" || s.Runs == nil {
			return d, nil
		}
		if err := s.settleStale(ctx, org, d.ProjectID, d.EnvID); err != nil {
			return nil, err
		}
	}
}

// ListDeployments returns an environment's deployments, newest first.
func (s *Service) ListDeployments(ctx context.Context, org, project, env string) ([]*Deployment, error) {
	if err := s.canRead(ctx, org); err != nil {
		return nil, err
	}
	if _, err := s.allowEnv(ctx, org, project, env, authz.RunRead); err != nil {
		return nil, err
	}
	return s.deployments(ctx, org, `project_id = ? AND env_id = ?`, project, env)
}

func (s *Service) deployments(ctx context.Context, org, where string, args ...any) ([]*Deployment, error) {
	rows, err := s.db.Query(ctx, `SELECT id, project_id, env_id, mode, status, status_message, manifest, diff, workspace_id, run_id, created_by, rollback_of, created_at, updated_at FROM orchestrator_deployments WHERE organization_name = ? AND `+where+` ORDER BY created_at DESC, id DESC`,
		append([]any{org}, args...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Deployment{}
	for rows.Next() {
		d := &Deployment{}
		var manifest, diff string
		var created, updated int64
		if err := rows.Scan(&d.ID, &d.ProjectID, &d.EnvID, &d.Mode, &d.Status, &d.StatusMessage, &manifest, &diff, &d.WorkspaceID, &d.RunID, &d.CreatedBy, &d.RollbackOf, &created, &updated); err != nil {
			return nil, err
		}
		d.CreatedAt, d.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
		d.Manifest = &orchestrator.Manifest{}
		_ = unmarshalNumber([]byte(manifest), d.Manifest)
		_ = json.Unmarshal([]byte(diff), &d.Diff)
		d.Diff = nonNil(d.Diff)
		out = append(out, d)
	}
	return out, rows.Err()
}

// StaleAfter is how long a deployment may stay executing without a run
// before a new deployment of its environment may declare it failed (its
// server process died before starting the run).
const StaleAfter = 10 * time.Minute

// settleStale ends executing deployments of an environment that no process
// is carrying out any more: one whose run is final gets the run's result,
// one that never started its run fails after StaleAfter.
func (s *Service) settleStale(ctx context.Context, org, project, env string) error {
	rows, err := s.db.Query(ctx, `SELECT id, run_id, updated_at FROM orchestrator_deployments WHERE organization_name = ? AND project_id = ? AND env_id = ? AND status = ?`, org, project, env, StatusExecuting)
	if err != nil {
		return err
	}
	type stale struct {
		id, runID string
		updated   int64
	}
	var list []stale
	for rows.Next() {
		var x stale
		if err := rows.Scan(&x.id, &x.runID, &x.updated); err != nil {
			rows.Close()
			return err
		}
		list = append(list, x)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, x := range list {
		status, msg := "", ""
		switch {
		case x.runID != "":
			st, final, ok, err := s.Runs.Status(ctx, x.runID)
			if err != nil || !final {
				continue
			}
			status = StatusSucceeded
			if !ok {
				status, msg = StatusFailed, fmt.Sprintf("run %s ended %s", x.runID, st)
			}
		case core.Now().Sub(core.FromMicros(x.updated)) > StaleAfter:
			status, msg = StatusFailed, "interrupted before its run started"
		default:
			continue
		}
		// Only if the process carrying it out has not finished it meanwhile.
		if _, err := s.db.Exec(ctx, `UPDATE orchestrator_deployments SET status = ?, status_message = ?, updated_at = ? WHERE id = ? AND status = ?`,
			status, msg, core.Micros(core.Now()), x.id, StatusExecuting); err != nil {
			return err
		}
	}
	return nil
}
