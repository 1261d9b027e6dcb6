package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
)

// More ID prefixes.
const (
	PrefixRun  = "sdr"
	PrefixStep = "sds"
)

// MaxApplies bounds the plan/apply cycles of one deployment run: a run
// whose plan still has changes after this many applies fails.
const MaxApplies = 4

// Run modes.
const (
	ModeNormal  = "normal"
	ModeDestroy = "destroy"
	// ModeImport: a deployment with import = true (a workspace migrated
	// into the stack): the import blocks of its components' modules are
	// active, and its first apply step is an import step.
	ModeImport = "import"
)

// Operation types of steps.
const (
	OpPlan   = "plan"
	OpApply  = "apply"
	OpImport = "import" // the first apply of an import-mode run
)

// DeploymentWorkspace is how a deployment's workspace is set up: from its
// stack.
type DeploymentWorkspace struct {
	Name string
	// StackID marks the workspace as the stack's: people read it, only
	// the stack's deployment runs change it.
	StackID string
	// TerraformVersion is the engine version ("" for the server's
	// default).
	TerraformVersion string
	// ExecutionMode is "remote" (the server's runners) or "agent" (only
	// the agents of AgentPoolID run its plans and applies).
	ExecutionMode, AgentPoolID string
}

// applies tells whether a step applies a plan (and needs the state).
func applies(op string) bool { return op == OpApply || op == OpImport }

// Executor runs Terraform for deployments through the platform's own
// workspaces, configuration versions and runs (so the job queue, runners,
// logs, state versions and cancellation are the usual ones). The
// composition root provides it.
type Executor interface {
	// Workspace returns the workspace backing a deployment, creating it
	// in the project when it does not exist, with the stack's engine
	// version and execution mode (an existing workspace is set to them).
	Workspace(ctx context.Context, org, projectID string, ws DeploymentWorkspace) (string, error)
	// Upload makes a configuration version of a tar.gz archive (a
	// speculative one, which only plan-only runs use, when speculative).
	Upload(ctx context.Context, org, workspaceID string, tarGz []byte, speculative bool) (string, error)
	// Start queues a run that plans and saves its plan (a saved plan,
	// which does not hold the workspace while it waits), or with
	// PlanOnly a speculative plan.
	Start(ctx context.Context, org string, req RunRequest) (string, error)
	// Apply applies the saved plan of a run that Start made: exactly what
	// was planned. A workspace busy with another run is a core.Conflict
	// (try again); a plan made stale by a change of state since is
	// discarded by the run service and cannot be applied.
	Apply(ctx context.Context, org, runID, comment string) error
	// Status reports a run.
	Status(ctx context.Context, org, runID string) (RunReport, error)
	// Artifact returns an artifact of a run: "plan-description" (the
	// redacted JSON plan), "plan-debug-log" and "apply-debug-log" (the
	// masked logs) or "apply-description" (a JSON summary of the apply).
	// One that does not exist (yet) is core.ErrNotFound.
	Artifact(ctx context.Context, org, runID, name string) ([]byte, error)
	// Cancel cancels a run that has not finished, or discards a saved
	// plan that waits.
	Cancel(ctx context.Context, org, runID string) error
	// Outputs returns the root outputs of a workspace's current state
	// (none when it has no state).
	Outputs(ctx context.Context, org, workspaceID string) (map[string]OutputValue, error)
	// Varset returns the variables of the organization's variable set
	// with that ID, or else that name, when it is global or applied to
	// the project (core.NotFound or core.Invalid, saying which, when not).
	Varset(ctx context.Context, org, projectID, id, name string) ([]VarsetVariable, error)
	// RemoveWorkspaces deletes the workspaces of the project whose names
	// begin with prefix and that manage no resources and are unlocked,
	// and returns the names of those it kept, each with why.
	RemoveWorkspaces(ctx context.Context, org, projectID, prefix string) (kept map[string]string, err error)
}

// OutputValue is a state output in Terraform's JSON: its value and its
// type in the type syntax.
type OutputValue struct {
	Value, Type json.RawMessage
	Sensitive   bool
}

// RunRequest is a run to start on a deployment's workspace.
type RunRequest struct {
	WorkspaceID, ConfigVersionID string
	Destroy                      bool
	Variables                    map[string]string // name → HCL expression
	// Sensitive names the Variables whose stack variable is sensitive:
	// their values must never be shown (run API, logs).
	Sensitive map[string]bool
	Message   string
	// PlanOnly: a speculative plan, which is never applied (else the plan
	// is saved to be applied once approved).
	PlanOnly bool
}

// RunReport is what a deployment needs to know of a run.
type RunReport struct {
	Status string
	Final  bool
	OK     bool // applied, or planned with nothing more to do
	// Saved: planned with changes, the plan saved and waiting to be
	// applied.
	Saved bool
	// Stale: a saved plan discarded because the state changed after it
	// was planned.
	Stale   bool
	Changes ChangeCounts
	Error   string
}

// DeploymentRun is one deployment's run for one configuration (go-tfe's
// StackDeploymentRun).
type DeploymentRun struct {
	ID              string
	StackID         string
	Organization    string
	ProjectID       string
	ConfigurationID string
	Sequence        int
	Deployment      string
	GroupID         string
	Status          RunStatus
	Mode            string
	ConfigVersionID string
	Applies         int
	ApprovedAt      time.Time
	Error           string
	Timestamps      map[string]time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
	// Speculative: a run of a speculative configuration, which plans
	// once (a plan-only run) and never applies, locks or publishes.
	Speculative bool
}

// Step is a step of a deployment run (go-tfe's StackDeploymentStep).
type Step struct {
	ID         string
	RunID      string
	Seq        int
	Operation  string
	Status     StepStatus
	TFERunID   string
	Changes    ChangeCounts
	Timestamps map[string]time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

const runCols = `r.id, r.stack_id, s.organization_name, s.project_id, r.stack_configuration_id, c.sequence_number, r.deployment_name, r.group_id, r.status, r.mode,
	r.configuration_version_id, r.applies, r.approved_at, r.error, r.status_timestamps, r.created_at, r.updated_at, c.speculative`

const runFrom = ` FROM stack_deployment_runs r JOIN stacks s ON s.id = r.stack_id JOIN stack_configurations c ON c.id = r.stack_configuration_id`

func scanRun(sc store.Scanner) (*DeploymentRun, error) {
	var r DeploymentRun
	var ts string
	var approved, cr, up int64
	if err := sc.Scan(&r.ID, &r.StackID, &r.Organization, &r.ProjectID, &r.ConfigurationID, &r.Sequence, &r.Deployment, &r.GroupID, &r.Status, &r.Mode,
		&r.ConfigVersionID, &r.Applies, &approved, &r.Error, &ts, &cr, &up, &r.Speculative); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(ts), &r.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding deployment run %s: %w", r.ID, err)
	}
	if approved != 0 {
		r.ApprovedAt = core.FromMicros(approved)
	}
	r.CreatedAt, r.UpdatedAt = core.FromMicros(cr), core.FromMicros(up)
	return &r, nil
}

func loadRun(ctx context.Context, q store.Q, id string, forUpdate bool) (*DeploymentRun, error) {
	if !core.HasPrefix(id, PrefixRun) {
		return nil, core.NotFound("deployment run %q not found", id)
	}
	query := `SELECT ` + runCols + runFrom + ` WHERE r.id = ?`
	if forUpdate && q.Driver().Name() == "postgres" {
		query += " FOR UPDATE OF r"
	}
	r, err := scanRun(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("deployment run %q not found", id)
	}
	return r, err
}

func insertRun(ctx context.Context, q store.Q, r *DeploymentRun) error {
	ts, _ := json.Marshal(r.Timestamps)
	_, err := q.Exec(ctx, `INSERT INTO stack_deployment_runs (id, stack_id, stack_configuration_id, deployment_name, group_id, status, mode,
		configuration_version_id, applies, approved_at, error, status_timestamps, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.StackID, r.ConfigurationID, r.Deployment, r.GroupID, string(r.Status), r.Mode, r.ConfigVersionID, r.Applies,
		micros(r.ApprovedAt), r.Error, string(ts), core.Micros(r.CreatedAt), core.Micros(r.UpdatedAt))
	return err
}

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return core.Micros(t)
}

// saveRun writes r if its status is still from (another writer may have
// moved it: then nothing is written and false is returned).
func saveRun(ctx context.Context, q store.Q, r *DeploymentRun, from RunStatus) (bool, error) {
	ts, _ := json.Marshal(r.Timestamps)
	res, err := q.Exec(ctx, `UPDATE stack_deployment_runs SET status = ?, configuration_version_id = ?, applies = ?, approved_at = ?,
		error = ?, status_timestamps = ?, updated_at = ? WHERE id = ? AND status = ?`,
		string(r.Status), r.ConfigVersionID, r.Applies, micros(r.ApprovedAt), r.Error, string(ts), core.Micros(r.UpdatedAt), r.ID, string(from))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// saveStatus is saveRun for a change of r's status (from from), in q's
// transaction: once written, the OnRunStatus hooks hear it there. Every
// status a run takes after it is made is written through here (and its
// first, pending, through newRun).
func (s *Service) saveStatus(ctx context.Context, q store.Q, r *DeploymentRun, from RunStatus) (bool, error) {
	ok, err := saveRun(ctx, q, r, from)
	if err != nil || !ok || r.Status == from {
		return ok, err
	}
	return true, s.told(ctx, q, r)
}

// newRun inserts a pending run in q's transaction and tells the
// OnRunStatus hooks.
func (s *Service) newRun(ctx context.Context, q store.Q, r *DeploymentRun) error {
	if err := insertRun(ctx, q, r); err != nil {
		return err
	}
	return s.told(ctx, q, r)
}

// told runs the OnRunStatus hooks on r's status in q's transaction.
func (s *Service) told(ctx context.Context, q store.Q, r *DeploymentRun) error {
	for _, h := range s.OnRunStatus {
		if err := h(ctx, q, r); err != nil {
			return err
		}
	}
	return nil
}

const stepCols = `id, stack_deployment_run_id, seq, operation_type, status, tfe_run_id, changes, status_timestamps, created_at, updated_at`

func scanStep(sc store.Scanner) (*Step, error) {
	var st Step
	var changes, ts string
	var cr, up int64
	if err := sc.Scan(&st.ID, &st.RunID, &st.Seq, &st.Operation, &st.Status, &st.TFERunID, &changes, &ts, &cr, &up); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(changes), &st.Changes); err != nil {
		return nil, fmt.Errorf("decoding deployment step %s: %w", st.ID, err)
	}
	if err := json.Unmarshal([]byte(ts), &st.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding deployment step %s: %w", st.ID, err)
	}
	st.CreatedAt, st.UpdatedAt = core.FromMicros(cr), core.FromMicros(up)
	return &st, nil
}

func insertStep(ctx context.Context, q store.Q, st *Step) error {
	changes, _ := json.Marshal(st.Changes)
	ts, _ := json.Marshal(st.Timestamps)
	_, err := q.Exec(ctx, `INSERT INTO stack_deployment_steps (`+stepCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		st.ID, st.RunID, st.Seq, st.Operation, string(st.Status), st.TFERunID, string(changes), string(ts), core.Micros(st.CreatedAt), core.Micros(st.UpdatedAt))
	return err
}

func saveStep(ctx context.Context, q store.Q, st *Step) error {
	changes, _ := json.Marshal(st.Changes)
	ts, _ := json.Marshal(st.Timestamps)
	_, err := q.Exec(ctx, `UPDATE stack_deployment_steps SET status = ?, tfe_run_id = ?, changes = ?, status_timestamps = ?, updated_at = ? WHERE id = ?`,
		string(st.Status), st.TFERunID, string(changes), string(ts), core.Micros(st.UpdatedAt), st.ID)
	return err
}

// saveStepFrom is saveStep for a step the loop moved on from status from
// (read outside any transaction): it writes only while the step still
// has it, and reports whether it did. Before (2026-11-30) the loop wrote
// the step unconditionally, and a step that Cancel abandoned meanwhile
// was written back completed or failed. One statement on the step's row:
// it takes no other lock.
func saveStepFrom(ctx context.Context, q store.Q, st *Step, from StepStatus) (bool, error) {
	changes, _ := json.Marshal(st.Changes)
	ts, _ := json.Marshal(st.Timestamps)
	res, err := q.Exec(ctx, `UPDATE stack_deployment_steps SET status = ?, tfe_run_id = ?, changes = ?, status_timestamps = ?, updated_at = ? WHERE id = ? AND status = ?`,
		string(st.Status), st.TFERunID, string(changes), string(ts), core.Micros(st.UpdatedAt), st.ID, string(from))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

func runSteps(ctx context.Context, q store.Q, runID string) ([]*Step, error) {
	return store.All(ctx, q, scanStep, `SELECT `+stepCols+` FROM stack_deployment_steps WHERE stack_deployment_run_id = ? ORDER BY seq`, runID)
}

// createRuns makes the deployment runs of a completed configuration: one
// per deployment (destroy mode for destroy = true or destroy-all), and a
// destroy run, with its last configuration, for each deployment that the
// configuration no longer declares. A speculative configuration changes
// no deployment: its runs only plan, and a deployment it leaves out is
// not destroyed. A configuration with selected deployments runs only
// those. Called in the completing transaction.
func (s *Service) createRuns(ctx context.Context, q store.Q, c *Configuration, cfg *Config) error {
	groups := map[string]string{}
	gs, err := store.All(ctx, q, func(sc store.Scanner) ([2]string, error) {
		var p [2]string
		return p, sc.Scan(&p[0], &p[1])
	}, `SELECT name, id FROM stack_deployment_groups WHERE stack_configuration_id = ?`, c.ID)
	if err != nil {
		return err
	}
	for _, g := range gs {
		groups[g[0]] = g[1]
	}
	now := nowUTC()
	// With a selection, only the deployments it names run.
	runs := func(name string) bool { return len(c.Selected) == 0 || slices.Contains(c.Selected, name) }
	for _, d := range cfg.Deployments {
		if !runs(d.Name) {
			continue
		}
		mode := runMode(c, d)
		r := &DeploymentRun{ID: core.NewID(PrefixRun), StackID: c.StackID, ConfigurationID: c.ID, Deployment: d.Name, GroupID: groups[d.Group],
			Status: RunPending, Mode: mode, Timestamps: map[string]time.Time{"pending-at": now}, CreatedAt: now, UpdatedAt: now, Speculative: c.Speculative}
		if err := s.newRun(ctx, q, r); err != nil {
			return err
		}
	}
	if c.Speculative {
		return nil
	}
	// Deployments removed from the configuration, still holding resources.
	gone, err := store.All(ctx, q, func(sc store.Scanner) ([2]string, error) {
		var p [2]string
		return p, sc.Scan(&p[0], &p[1])
	}, `SELECT name, last_configuration_id FROM stack_deployments WHERE stack_id = ? AND removed AND workspace_id <> '' AND last_configuration_id <> ''`, c.StackID)
	if err != nil {
		return err
	}
	for _, g := range gone {
		if !runs(g[0]) {
			continue
		}
		var active int
		if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM stack_deployment_runs r JOIN stack_configurations c ON c.id = r.stack_configuration_id
			WHERE r.stack_id = ? AND r.deployment_name = ? AND r.mode = ? AND NOT c.speculative AND r.status NOT IN ('succeeded', 'failed', 'abandoned')`,
			c.StackID, g[0], ModeDestroy).Scan(&active); err != nil {
			return err
		}
		if active > 0 {
			continue
		}
		r := &DeploymentRun{ID: core.NewID(PrefixRun), StackID: c.StackID, ConfigurationID: g[1], Deployment: g[0], Status: RunPending, Mode: ModeDestroy,
			Timestamps: map[string]time.Time{"pending-at": now}, CreatedAt: now, UpdatedAt: now}
		if err := s.newRun(ctx, q, r); err != nil {
			return err
		}
	}
	return nil
}

// runMode is the mode of a run of deployment d by configuration c: destroy
// for destroy = true or a destroy-all configuration, import for import =
// true, else normal.
func runMode(c *Configuration, d *Deployment) string {
	switch {
	case d.Destroy || c.DestroyAll:
		return ModeDestroy
	case d.Import:
		return ModeImport
	}
	return ModeNormal
}

// Run advances deployment runs until ctx ends: every interval, and at
// once when Wake is signalled.
func (s *Service) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		s.Advance(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wake.C():
		}
	}
}

// Wake is the deployment-run loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.wake }

func (s *Service) nudge() { s.wake.Signal() }

// Advance moves every unfinished deployment run one step further where it
// can. Errors are recorded on the run (it fails) or logged when the store
// itself fails.
func (s *Service) Advance(ctx context.Context) {
	if s.exec == nil {
		return
	}
	runs, err := store.All(ctx, s.db, scanRun, `SELECT `+runCols+runFrom+` WHERE r.status NOT IN ('succeeded', 'failed', 'abandoned') ORDER BY r.created_at, r.id`)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Error("listing deployment runs", "error", err)
		}
		return
	}
	for _, r := range runs {
		if ctx.Err() != nil {
			return
		}
		if err := s.advance(ctx, r); err != nil {
			s.logger.Error("advancing deployment run", "run", r.ID, "error", err)
		}
	}
	s.releaseAbandoned(ctx)
}

func (s *Service) advance(ctx context.Context, r *DeploymentRun) error {
	steps, err := runSteps(ctx, s.db, r.ID)
	if err != nil {
		return err
	}
	var last *Step
	if len(steps) > 0 {
		last = steps[len(steps)-1]
	}
	switch r.Status {
	case RunPending:
		return s.begin(ctx, r)
	case RunAcquiringLock:
		return s.acquire(ctx, r)
	case RunPreDeploying, RunDeploying:
		if last == nil {
			return s.fail(ctx, r, last, "the run has no step")
		}
		switch last.Status {
		case StepRunning:
			return s.watch(ctx, r, last)
		case StepCompleted:
			if last.Operation == OpPlan && r.Status == RunDeploying {
				return s.startStep(ctx, r, OpApply, len(steps))
			}
		}
	}
	return nil
}

// begin compiles the deployment, uploads it to the deployment's workspace
// and starts the first plan.
func (s *Service) begin(ctx context.Context, r *DeploymentRun) error {
	c, err := loadConfig(ctx, s.db, r.ConfigurationID, false)
	if err != nil {
		return err
	}
	st, err := loadStack(ctx, s.db, r.StackID, false)
	if err != nil {
		return err
	}
	tgz, compiled, diags := s.compileArchive(ctx, c, st.ProjectID, st.WorkingDirectory, r.Deployment)
	if diags.HasErrors() {
		if err := s.recordDiagnostics(ctx, c.ID, diags); err != nil {
			return err
		}
		return s.fail(ctx, r, nil, diags.Err().Error())
	}
	wsID, err := s.exec.Workspace(ctx, r.Organization, st.ProjectID, DeploymentWorkspace{Name: "stack-" + st.ID + "-" + r.Deployment, StackID: st.ID,
		TerraformVersion: st.TerraformVersion, ExecutionMode: st.ExecutionMode, AgentPoolID: st.AgentPoolID})
	if err != nil {
		return s.fail(ctx, r, nil, fmt.Sprintf("preparing the deployment's workspace: %v", err))
	}
	// A speculative run of a deployment never deployed has no deployment
	// row to record the workspace in (the statement changes nothing); it
	// plans in the workspace the deployment will have, which holds no
	// state yet.
	if _, err := s.db.Exec(ctx, `UPDATE stack_deployments SET workspace_id = ? WHERE stack_id = ? AND name = ?`, wsID, r.StackID, r.Deployment); err != nil {
		return err
	}
	cvID, err := s.exec.Upload(ctx, r.Organization, wsID, tgz, r.Speculative)
	if err != nil {
		return s.fail(ctx, r, nil, fmt.Sprintf("uploading the generated configuration: %v", err))
	}
	r.ConfigVersionID = cvID
	// Before the status moves: a crash in between begins the run again.
	if err := s.setInputs(ctx, r.ID, compiled); err != nil {
		return err
	}
	from := r.Status
	if err := transitionRun(r, RunPreDeploying); err != nil {
		return err
	}
	var ok bool
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		ok, err = s.saveStatus(ctx, tx, r, from)
		return err
	})
	if err != nil || !ok {
		return err
	}
	return s.startPlan(ctx, r, wsID, 0)
}

// compileArchive unpacks a configuration, writes the deployment's
// generated root module beside the stack files and packs it again.
func (s *Service) compileArchive(ctx context.Context, c *Configuration, projectID, workdir, deployment string) ([]byte, *Compiled, Diagnostics) {
	fail := func(summary, detail string) ([]byte, *Compiled, Diagnostics) {
		return nil, nil, Diagnostics{{Severity: SeverityError, Summary: summary, Detail: detail}}
	}
	dir, err := os.MkdirTemp("", "terrace-stack-run-")
	if err != nil {
		return fail("Cannot prepare the deployment", err.Error())
	}
	defer os.RemoveAll(dir)
	rd, _, err := s.blobs.Reader(ctx, c.blobKey)
	if err != nil {
		return fail("Cannot read the configuration archive", err.Error())
	}
	err = slug.Unpack(rd, dir, slug.Limits{})
	rd.Close()
	if err != nil {
		return fail("Invalid configuration archive", err.Error())
	}
	root := filepath.Join(dir, filepath.FromSlash(workdir))
	cfg, diags := ParseFS(os.DirFS(root))
	if diags.HasErrors() {
		return nil, nil, diags
	}
	if cfg.Upstream, diags = s.upstreamValues(ctx, c.Organization, cfg); diags.HasErrors() {
		return nil, nil, diags
	}
	if cfg.StoreValues, diags = s.storeValues(ctx, c.Organization, projectID, cfg); diags.HasErrors() {
		return nil, nil, diags
	}
	// Import blocks of the components' modules move to the root module
	// (for a deployment in import mode) or go.
	imports, idiags := liftImports(root, cfg)
	if d := cfg.Deployment(deployment); d != nil && d.Import && !d.Destroy {
		if idiags.HasErrors() {
			return nil, nil, idiags
		}
		cfg.Imports = imports
	}
	out, diags := cfg.Compile(deployment)
	if diags.HasErrors() {
		return nil, nil, diags
	}
	if err := os.WriteFile(filepath.Join(root, GeneratedFile), out.File, 0o644); err != nil {
		return fail("Cannot prepare the deployment", err.Error())
	}
	tgz, err := slug.Pack(dir)
	if err != nil {
		return fail("Cannot pack the deployment's configuration", err.Error())
	}
	return tgz, out, nil
}

// startStep starts a plan step as a saved-plan run on the workspace, or an
// apply step that applies the saved plan of the plan step before it.
func (s *Service) startStep(ctx context.Context, r *DeploymentRun, op string, seq int) error {
	if op == OpApply {
		return s.startApply(ctx, r, seq)
	}
	var wsID string
	if err := s.db.QueryRow(ctx, `SELECT workspace_id FROM stack_deployments WHERE stack_id = ? AND name = ?`, r.StackID, r.Deployment).Scan(&wsID); err != nil {
		return err
	}
	return s.startPlan(ctx, r, wsID, seq)
}

// startPlan starts a plan step on the deployment's workspace: a saved
// plan, or for a speculative run a plan-only run.
func (s *Service) startPlan(ctx context.Context, r *DeploymentRun, wsID string, seq int) error {
	now := nowUTC()
	st := &Step{ID: core.NewID(PrefixStep), RunID: r.ID, Seq: seq, Operation: OpPlan, Status: StepQueued, Timestamps: map[string]time.Time{"queued-at": now},
		CreatedAt: now, UpdatedAt: now}
	msg := fmt.Sprintf("Stack deployment %s, plan step %d of %s", r.Deployment, seq+1, r.ID)
	if r.Speculative {
		msg = fmt.Sprintf("Stack deployment %s, speculative plan of %s", r.Deployment, r.ID)
	}
	sensitive, err := s.sensitiveInputs(ctx, r)
	if err != nil {
		return s.fail(ctx, r, nil, fmt.Sprintf("reading the deployment's variables: %v", err))
	}
	vars, err := s.variables(ctx, r.ID)
	if err != nil {
		return err
	}
	tfeRun, err := s.exec.Start(ctx, r.Organization, RunRequest{WorkspaceID: wsID, ConfigVersionID: r.ConfigVersionID,
		Destroy: r.Mode == ModeDestroy, Variables: vars, Sensitive: sensitive, Message: msg, PlanOnly: r.Speculative})
	if err != nil {
		return s.fail(ctx, r, nil, fmt.Sprintf("starting the plan: %v", err))
	}
	st.TFERunID = tfeRun
	if err := transitionStep(st, StepRunning); err != nil {
		return err
	}
	return insertStep(ctx, s.db, st)
}

// sensitiveInputs returns the names of the run's inputs whose stack
// variable is declared sensitive.
func (s *Service) sensitiveInputs(ctx context.Context, r *DeploymentRun) (map[string]bool, error) {
	c, err := loadConfig(ctx, s.db, r.ConfigurationID, false)
	if err != nil {
		return nil, err
	}
	st, err := loadStack(ctx, s.db, r.StackID, false)
	if err != nil {
		return nil, err
	}
	cfg, diags := s.parseArchive(ctx, c.blobKey, st.WorkingDirectory)
	if diags.HasErrors() || cfg == nil {
		return nil, diags.Err()
	}
	out := map[string]bool{}
	for _, v := range cfg.Variables {
		if v.Sensitive {
			out[v.Name] = true
		}
	}
	return out, nil
}

// startApply applies the plan the operator (or the checks) approved: the
// saved plan of the run's last plan step, never a new plan. A plan made
// stale by a change of the deployment's state since it was planned fails
// the run with a diagnostic; nothing is applied.
func (s *Service) startApply(ctx context.Context, r *DeploymentRun, seq int) error {
	steps, err := runSteps(ctx, s.db, r.ID)
	if err != nil {
		return err
	}
	var plan *Step
	for _, st := range steps {
		if st.Operation == OpPlan {
			plan = st
		}
	}
	if plan == nil || plan.TFERunID == "" {
		return s.fail(ctx, r, nil, "there is no approved plan to apply")
	}
	rep, err := s.exec.Status(ctx, r.Organization, plan.TFERunID)
	if err != nil {
		return s.fail(ctx, r, nil, fmt.Sprintf("reading the approved plan's run %s: %v", plan.TFERunID, err))
	}
	if !rep.Saved {
		return s.fail(ctx, r, nil, staleMessage(plan.TFERunID, rep))
	}
	msg := fmt.Sprintf("Applying the approved plan of stack deployment %s (deployment run %s)", r.Deployment, r.ID)
	if err := s.exec.Apply(ctx, r.Organization, plan.TFERunID, msg); err != nil {
		if core.KindOf(err) != core.KindConflict {
			return s.fail(ctx, r, nil, fmt.Sprintf("applying the approved plan (run %s): %v", plan.TFERunID, err))
		}
		// The workspace is busy (another run on it, or someone locked
		// it): try again on the next tick, for at most applyWait.
		if waited, over := s.busyFor(r.ID); over {
			s.clearBusy(r.ID)
			// The saved plan will never be applied: discard it too.
			if _, err := s.db.Exec(ctx, `UPDATE stack_deployment_steps SET release_run = ? WHERE id = ?`, plan.TFERunID, plan.ID); err != nil {
				return err
			}
			return s.fail(ctx, r, nil, fmt.Sprintf("The approved plan (run %s) was not applied: the deployment's workspace stayed busy or locked for %s (%v). "+
				"Unlock the workspace or let its other run finish, then rerun the deployment.", plan.TFERunID, waited.Round(time.Second), err))
		}
		return nil
	}
	s.clearBusy(r.ID)
	now := nowUTC()
	op := OpApply
	if r.Mode == ModeImport && r.Applies == 0 {
		op = OpImport
	}
	st := &Step{ID: core.NewID(PrefixStep), RunID: r.ID, Seq: seq, Operation: op, Status: StepQueued, Timestamps: map[string]time.Time{"queued-at": now},
		TFERunID: plan.TFERunID, CreatedAt: now, UpdatedAt: now}
	if err := transitionStep(st, StepRunning); err != nil {
		return err
	}
	return insertStep(ctx, s.db, st)
}

// busyFor records that run r found its workspace busy and reports how
// long it has been waiting and whether that is longer than applyWait.
func (s *Service) busyFor(runID string) (time.Duration, bool) {
	s.busyMu.Lock()
	defer s.busyMu.Unlock()
	now := time.Now()
	since, ok := s.busySince[runID]
	if !ok {
		s.busySince[runID] = now
		return 0, false
	}
	waited := now.Sub(since)
	return waited, waited > s.applyWait
}

func (s *Service) clearBusy(runID string) {
	s.busyMu.Lock()
	delete(s.busySince, runID)
	s.busyMu.Unlock()
}

// staleMessage explains why an approved plan cannot be applied.
func staleMessage(runID string, rep RunReport) string {
	if rep.Stale {
		return fmt.Sprintf("The approved plan (run %s) is stale: the deployment's state changed after it was planned, "+
			"so it was discarded and nothing was applied. Upload or reuse a configuration to plan again.", runID)
	}
	return fmt.Sprintf("The approved plan (run %s) can no longer be applied: its run is %s. Nothing was applied.", runID, rep.Status)
}

// watch follows a running step's run and acts when it ends.
func (s *Service) watch(ctx context.Context, r *DeploymentRun, st *Step) error {
	rep, err := s.exec.Status(ctx, r.Organization, st.TFERunID)
	if err != nil {
		return s.fail(ctx, r, st, fmt.Sprintf("reading run %s: %v", st.TFERunID, err))
	}
	if st.Operation == OpPlan && rep.Saved {
		// Planned with changes; the saved plan waits for approval.
		st.Changes = rep.Changes
		return s.planned(ctx, r, st)
	}
	if !rep.Final {
		return nil
	}
	if rep.Stale {
		return s.fail(ctx, r, st, staleMessage(st.TFERunID, rep))
	}
	if !rep.OK {
		msg := fmt.Sprintf("the %s (run %s) ended %s", st.Operation, st.TFERunID, rep.Status)
		if rep.Error != "" {
			msg += ": " + rep.Error
		}
		return s.fail(ctx, r, st, msg)
	}
	st.Changes = rep.Changes
	if applies(st.Operation) {
		from := st.Status
		if err := transitionStep(st, StepCompleted); err != nil {
			return err
		}
		if ok, err := saveStepFrom(ctx, s.db, st, from); err != nil || !ok {
			return err // not ok: abandoned meanwhile (Cancel), the run with it
		}
		r.Applies++
		r.UpdatedAt = nowUTC()
		if ok, err := saveRun(ctx, s.db, r, r.Status); err != nil || !ok {
			return err
		}
		// Convergence: plan again after every apply.
		return s.startStep(ctx, r, OpPlan, st.Seq+1)
	}
	return s.planned(ctx, r, st)
}

// planned decides what follows a finished plan: an empty plan, or any
// plan of a speculative run, ends the run; otherwise the group's checks
// approve it or an operator must.
func (s *Service) planned(ctx context.Context, r *DeploymentRun, st *Step) error {
	if st.Changes.Total == 0 || r.Speculative {
		from := st.Status
		if err := transitionStep(st, StepCompleted); err != nil {
			return err
		}
		if ok, err := saveStepFrom(ctx, s.db, st, from); err != nil || !ok {
			return err // not ok: abandoned meanwhile (Cancel)
		}
		return s.finish(ctx, r, RunSucceeded, "")
	}
	if r.Applies >= MaxApplies {
		from := st.Status
		if err := transitionStep(st, StepFailed); err != nil {
			return err
		}
		if ok, err := saveStepFrom(ctx, s.db, st, from); err != nil || !ok {
			return err // not ok: abandoned meanwhile (Cancel)
		}
		msg := fmt.Sprintf("The deployment did not converge: its plan still has %d changes after %d applies.", st.Changes.Total, r.Applies)
		if err := s.recordDiagnostics(ctx, r.ConfigurationID, Diagnostics{{Severity: SeverityError, Summary: "Deployment did not converge", Detail: msg}}); err != nil {
			return err
		}
		return s.finish(ctx, r, RunFailed, msg)
	}
	approved, err := s.autoApproved(ctx, r, st)
	if err != nil {
		return err
	}
	from := r.Status
	switch {
	case approved && r.Status == RunPreDeploying:
		err = transitionRun(r, RunAcquiringLock)
		r.ApprovedAt = nowUTC()
	case approved:
		// deploying: the loop starts the apply next.
	case r.Status == RunPreDeploying:
		err = transitionRun(r, RunPreDeployingPendingOperator)
	default:
		err = transitionRun(r, RunDeployingPendingOperator)
	}
	if err != nil {
		return err
	}
	next := StepCompleted
	if !approved {
		next = StepPendingOperator
	}
	if err := transitionStep(st, next); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		// The run's row before its step's, as Approve and abandonOlder
		// take them.
		if ok, err := s.saveStatus(ctx, tx, r, from); err != nil || !ok {
			if err == nil {
				err = core.Conflict("deployment run %s changed meanwhile", r.ID)
			}
			return err
		}
		if err := saveStep(ctx, tx, st); err != nil {
			return err
		}
		if r.Status == RunAcquiringLock {
			// An approval, automatic or not, dismisses older pending plans.
			return s.abandonOlder(ctx, tx, r)
		}
		return nil
	})
}

func (s *Service) autoApproved(ctx context.Context, r *DeploymentRun, st *Step) (bool, error) {
	c, err := loadConfig(ctx, s.db, r.ConfigurationID, false)
	if err != nil {
		return false, err
	}
	stk, err := loadStack(ctx, s.db, r.StackID, false)
	if err != nil {
		return false, err
	}
	cfg, diags := s.parseArchive(ctx, c.blobKey, stk.WorkingDirectory)
	if diags.HasErrors() || cfg == nil {
		return false, nil
	}
	group := ""
	if d := cfg.Deployment(r.Deployment); d != nil {
		group = d.Group
	}
	a, d := cfg.AutoApprove(group, PlanContext{Operation: "plan", Success: true, Mode: r.Mode, Applyable: true, Changes: st.Changes,
		Replans: r.Applies, Deployment: r.Deployment})
	if len(d) > 0 {
		if err := s.recordDiagnostics(ctx, r.ConfigurationID, d); err != nil {
			return false, err
		}
	}
	return a.Approved, nil
}

// acquire takes the deployment's state lock for r when it is free and r
// is the earliest approved run waiting for it.
//
// It locks r's row first, then the deployment's, the order in which a
// run's end (finish, Cancel's abandon) takes them, and reads r there:
// before (2026-11-30) it read r before the transaction and took the
// deployment's row alone, and on PostgreSQL a run canceled meanwhile was
// given the lock (its own status write found the run abandoned and wrote
// nothing, the lock's did): the deployment stayed locked by an abandoned
// run and every later run of it waited for good.
func (s *Service) acquire(ctx context.Context, r *DeploymentRun) error {
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		cur, err := loadRun(ctx, tx, r.ID, true)
		if err != nil {
			return err
		}
		if cur.Status != RunAcquiringLock {
			return nil
		}
		*r = *cur
		var holder string
		if err := tx.QueryRow(ctx, `SELECT lock_run_id FROM stack_deployments WHERE stack_id = ? AND name = ?`+store.ForUpdate(tx), r.StackID, r.Deployment).Scan(&holder); err != nil {
			return err
		}
		if holder != "" && holder != r.ID {
			return nil
		}
		var first string
		err = tx.QueryRow(ctx, `SELECT id FROM stack_deployment_runs WHERE stack_id = ? AND deployment_name = ? AND status = ? ORDER BY approved_at, id LIMIT 1`,
			r.StackID, r.Deployment, string(RunAcquiringLock)).Scan(&first)
		if err != nil || first != r.ID {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE stack_deployments SET lock_run_id = ? WHERE stack_id = ? AND name = ?`, r.ID, r.StackID, r.Deployment); err != nil {
			return err
		}
		from := r.Status
		if err := transitionRun(r, RunDeploying); err != nil {
			return err
		}
		_, err = s.saveStatus(ctx, tx, r, from)
		return err
	})
}

// finish ends a run and releases the deployment's lock if it held it.
func (s *Service) finish(ctx context.Context, r *DeploymentRun, to RunStatus, msg string) error {
	s.clearBusy(r.ID)
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		from := r.Status
		if err := transitionRun(r, to); err != nil {
			return err
		}
		r.Error = msg
		if ok, err := s.saveStatus(ctx, tx, r, from); err != nil || !ok {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE stack_deployments SET lock_run_id = '' WHERE stack_id = ? AND name = ? AND lock_run_id = ?`, r.StackID, r.Deployment, r.ID)
		return err
	})
	if err == nil && to == RunSucceeded && r.Mode == ModeNormal && !r.Speculative {
		// Its outputs may change what the stack publishes.
		if err := s.publish(ctx, r); err != nil {
			s.logger.Error("publishing the stack's outputs", "run", r.ID, "error", err)
		}
	}
	return err
}

// fail ends the step (if any) and the run as failed, with a diagnostic.
//
// A step abandoned meanwhile (Cancel: its run is abandoned too) stays so,
// and nothing more is recorded.
func (s *Service) fail(ctx context.Context, r *DeploymentRun, st *Step, msg string) error {
	if st != nil && !st.Status.Final() {
		from := st.Status
		if err := transitionStep(st, StepFailed); err == nil {
			if ok, err := saveStepFrom(ctx, s.db, st, from); err != nil || !ok {
				return err
			}
		}
	}
	if err := s.recordDiagnostics(ctx, r.ConfigurationID, Diagnostics{{Severity: SeverityError, Summary: "Deployment " + r.Deployment + " failed", Detail: msg}}); err != nil {
		return err
	}
	return s.finish(ctx, r, RunFailed, msg)
}

func (s *Service) recordDiagnostics(ctx context.Context, cfgID string, diags Diagnostics) error {
	return s.db.Tx(ctx, func(tx *store.Tx) error { return insertDiagnostics(ctx, tx, cfgID, diags) })
}

// GetRun returns a deployment run the caller can see.
func (s *Service) GetRun(ctx context.Context, id string) (*DeploymentRun, error) {
	r, err := loadRun(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := canRead(ctx, r.Organization, r.ProjectID); err != nil {
		return nil, core.NotFound("deployment run %q not found", id)
	}
	return r, nil
}

// ListGroupRuns lists a deployment group's runs, oldest first.
func (s *Service) ListGroupRuns(ctx context.Context, groupID string) ([]*DeploymentRun, error) {
	if _, err := s.GetGroup(ctx, groupID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanRun, `SELECT `+runCols+runFrom+` WHERE r.group_id = ? ORDER BY r.created_at, r.id`, groupID)
}

// ListDeploymentRuns lists at most limit (all when negative) of a
// deployment's runs, newest first, from offset on, and how many it has:
// a deployment's history only grows, so the store selects the page. With
// speculative false, the runs of speculative configurations are left out.
func (s *Service) ListDeploymentRuns(ctx context.Context, stackID, deployment string, speculative bool, offset, limit int) ([]*DeploymentRun, int, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, 0, err
	}
	where := `r.stack_id = ? AND r.deployment_name = ?`
	if !speculative {
		where += ` AND NOT c.speculative`
	}
	return store.Page(ctx, s.db, scanRun, runCols, strings.TrimPrefix(runFrom, ` FROM `), where, `r.created_at DESC, r.id`, offset, limit, stackID, deployment)
}

// RecentRuns returns, by deployment, at most per of each deployment's
// newest runs that are not speculative plans, newest first (what
// ListDeploymentRuns pages): the stack's page, in one statement.
func (s *Service) RecentRuns(ctx context.Context, stackID string, per int) (map[string][]*DeploymentRun, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, err
	}
	runs, err := store.All(ctx, s.db, scanRun, `SELECT `+runCols+runFrom+` WHERE r.id IN (SELECT id FROM (
			SELECT r2.id, ROW_NUMBER() OVER (PARTITION BY r2.deployment_name ORDER BY r2.created_at DESC, r2.id) AS n
			FROM stack_deployment_runs r2 JOIN stack_configurations c2 ON c2.id = r2.stack_configuration_id
			WHERE r2.stack_id = ? AND NOT c2.speculative) ranked WHERE n <= ?)
		ORDER BY r.deployment_name, r.created_at DESC, r.id`, stackID, per)
	if err != nil {
		return nil, err
	}
	out := map[string][]*DeploymentRun{}
	for _, r := range runs {
		out[r.Deployment] = append(out[r.Deployment], r)
	}
	return out, nil
}

// ListSpeculativeRuns lists at most limit of the stack's speculative plans
// (the runs of its speculative configurations), newest first.
func (s *Service) ListSpeculativeRuns(ctx context.Context, stackID string, limit int) ([]*DeploymentRun, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.db, scanRun, `SELECT `+runCols+runFrom+` WHERE r.stack_id = ? AND c.speculative ORDER BY r.created_at DESC, r.id LIMIT ?`, stackID, limit)
}

// LatestRuns returns the ID of the newest run of each named deployment
// that is not a speculative plan (what the deployment is at); a
// deployment without one is absent. One statement for the page.
func (s *Service) LatestRuns(ctx context.Context, stackID string, names []string) (map[string]string, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, err
	}
	out := map[string]string{}
	if len(names) == 0 {
		return out, nil
	}
	in, args := store.In(names)
	pairs, err := store.Pairs(ctx, s.db, `SELECT d.name, COALESCE((SELECT r.id FROM stack_deployment_runs r JOIN stack_configurations c ON c.id = r.stack_configuration_id
			WHERE r.stack_id = d.stack_id AND r.deployment_name = d.name AND NOT c.speculative ORDER BY r.created_at DESC, r.id LIMIT 1), '')
		FROM stack_deployments d WHERE d.stack_id = ? AND d.name IN (`+in+`)`, append([]any{stackID}, args...)...)
	if err != nil {
		return nil, err
	}
	for _, p := range pairs {
		if p[1] != "" {
			out[p[0]] = p[1]
		}
	}
	return out, nil
}

// ListSteps lists a run's steps in order.
func (s *Service) ListSteps(ctx context.Context, runID string) ([]*Step, error) {
	if _, err := s.GetRun(ctx, runID); err != nil {
		return nil, err
	}
	return runSteps(ctx, s.db, runID)
}

// GetStep returns a step and its run.
func (s *Service) GetStep(ctx context.Context, id string) (*Step, *DeploymentRun, error) {
	if !core.HasPrefix(id, PrefixStep) {
		return nil, nil, core.NotFound("deployment step %q not found", id)
	}
	st, err := scanStep(s.db.QueryRow(ctx, `SELECT `+stepCols+` FROM stack_deployment_steps WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, nil, core.NotFound("deployment step %q not found", id)
	}
	if err != nil {
		return nil, nil, err
	}
	r, err := s.GetRun(ctx, st.RunID)
	if err != nil {
		return nil, nil, core.NotFound("deployment step %q not found", id)
	}
	return st, r, nil
}

// Approve approves the plan waiting for an operator in a run (the advance
// of its step). Approving a first plan dismisses the pending plans of the
// same deployment from older configurations (they are abandoned).
func (s *Service) Approve(ctx context.Context, runID string) error {
	r, err := s.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if err := canApprove(ctx, r.Organization, r.ProjectID); err != nil {
		return err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error { return s.approveIn(ctx, tx, runID) })
	if err == nil {
		s.nudge()
	}
	return err
}

// approveIn is Approve's change, inside q's transaction: the run's row,
// then its steps', then the older runs' (abandonOlder).
func (s *Service) approveIn(ctx context.Context, q store.Q, runID string) error {
	r, err := loadRun(ctx, q, runID, true)
	if err != nil {
		return err
	}
	steps, err := runSteps(ctx, q, r.ID)
	if err != nil {
		return err
	}
	if len(steps) == 0 || steps[len(steps)-1].Status != StepPendingOperator {
		return core.Conflict("deployment run %s has no plan waiting for approval (it is %s)", r.ID, r.Status)
	}
	st := steps[len(steps)-1]
	if err := transitionStep(st, StepCompleted); err != nil {
		return err
	}
	from := r.Status
	next := RunDeploying
	if r.Status == RunPreDeployingPendingOperator {
		next = RunAcquiringLock
		r.ApprovedAt = nowUTC()
	}
	if err := transitionRun(r, next); err != nil {
		return core.Conflict("%v", err)
	}
	if err := saveStep(ctx, q, st); err != nil {
		return err
	}
	if ok, err := s.saveStatus(ctx, q, r, from); err != nil || !ok {
		if err == nil {
			err = core.Conflict("deployment run %s changed meanwhile; try again", r.ID)
		}
		return err
	}
	if next != RunAcquiringLock {
		return nil
	}
	return s.abandonOlder(ctx, q, r)
}

// abandonOlder abandons the runs of r's deployment from older
// configurations that have not reached the lock (speculative plans, which
// never apply, run to their end).
//
// They are read locked, so that one approved (or moved on by the loop)
// while this reads is read as that left it, and skipped once past the
// statuses abandoned here: before (2026-11-30), on PostgreSQL, a run
// approved meanwhile had its approved plan step abandoned and its saved
// plan discarded under it. r's row is locked already; the older runs are
// locked newest first, so that two approvals of different runs of one
// deployment (each holding its own run and locking the older ones) take
// the rows they share in one order. A run's row is always taken before
// its steps' (Approve, planned, Cancel).
func (s *Service) abandonOlder(ctx context.Context, q store.Q, r *DeploymentRun) error {
	lock := ""
	if q.Driver().Name() == "postgres" {
		lock = " FOR UPDATE OF r"
	}
	older, err := store.All(ctx, q, scanRun, `SELECT `+runCols+runFrom+` WHERE r.stack_id = ? AND r.deployment_name = ? AND c.sequence_number < ? AND NOT c.speculative AND r.status IN (?, ?, ?)
		ORDER BY c.sequence_number DESC, r.id`+lock,
		r.StackID, r.Deployment, r.Sequence, string(RunPending), string(RunPreDeploying), string(RunPreDeployingPendingOperator))
	if err != nil {
		return err
	}
	for _, o := range older {
		if err := s.abandon(ctx, q, o); err != nil {
			return err
		}
	}
	return nil
}

// abandon ends r abandoned in q's transaction (Cancel, or a newer
// approval dismissing it: abandonOlder), its unfinished steps with it, and
// releases the deployment's lock if r held it. The OnRunStatus hooks hear
// it as they hear finish's ends.
func (s *Service) abandon(ctx context.Context, q store.Q, r *DeploymentRun) error {
	steps, err := runSteps(ctx, q, r.ID)
	if err != nil {
		return err
	}
	for _, st := range steps {
		if !st.Status.Final() {
			if err := transitionStep(st, StepAbandoned); err != nil {
				return err
			}
			if err := saveStep(ctx, q, st); err != nil {
				return err
			}
			if st.TFERunID != "" {
				// Its saved plan (or a plan still running) must not
				// linger on the workspace: releaseAbandoned discards it.
				if _, err := q.Exec(ctx, `UPDATE stack_deployment_steps SET release_run = ? WHERE id = ?`, st.TFERunID, st.ID); err != nil {
					return err
				}
			}
		}
	}
	from := r.Status
	if err := transitionRun(r, RunAbandoned); err != nil {
		return err
	}
	if _, err := s.saveStatus(ctx, q, r, from); err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE stack_deployments SET lock_run_id = '' WHERE stack_id = ? AND name = ? AND lock_run_id = ?`, r.StackID, r.Deployment, r.ID)
	return err
}

// Cancel abandons an unfinished run, cancelling the run of its current
// step, and releases the deployment's lock.
func (s *Service) Cancel(ctx context.Context, runID string) error {
	r, err := s.GetRun(ctx, runID)
	if err != nil {
		return err
	}
	if err := canApprove(ctx, r.Organization, r.ProjectID); err != nil {
		return err
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		r, err := loadRun(ctx, tx, runID, true)
		if err != nil {
			return err
		}
		if r.Status.Final() {
			return core.Conflict("deployment run %s is %s", r.ID, r.Status)
		}
		return s.abandon(ctx, tx, r)
	})
	if err != nil {
		return err
	}
	if s.exec != nil {
		s.releaseAbandoned(context.WithoutCancel(ctx))
	}
	s.nudge()
	return nil
}

// releaseAbandoned discards the saved plans (and cancels the plans still
// running) of abandoned steps: a plan dismissed by a newer approval or a
// cancel must not keep its plan file, nor later take the workspace. Each
// step is marked in the transaction that abandons it and unmarked once its
// run has ended, so a failure or a restart only delays the release to the
// next tick.
func (s *Service) releaseAbandoned(ctx context.Context) {
	type pending struct{ stepID, runID, org string }
	rows, err := store.All(ctx, s.db, func(sc store.Scanner) (pending, error) {
		var p pending
		return p, sc.Scan(&p.stepID, &p.runID, &p.org)
	}, `SELECT t.id, t.release_run, s.organization_name FROM stack_deployment_steps t
		JOIN stack_deployment_runs r ON r.id = t.stack_deployment_run_id JOIN stacks s ON s.id = r.stack_id WHERE t.release_run <> ''`)
	if err != nil {
		if ctx.Err() == nil {
			s.logger.Error("listing abandoned plans", "error", err)
		}
		return
	}
	for _, p := range rows {
		// Once the run service has the discard (or the cancel: a runner
		// stops the plan and the run ends), the step is released.
		rep, err := s.exec.Status(ctx, p.org, p.runID)
		if err == nil && !rep.Final {
			err = s.exec.Cancel(ctx, p.org, p.runID)
			if core.KindOf(err) == core.KindConflict {
				// Its status changed meanwhile; look again next tick.
				continue
			}
		}
		if err != nil && core.KindOf(err) != core.KindNotFound {
			s.logger.Warn("discarding the plan of an abandoned deployment step", "step", p.stepID, "run", p.runID, "error", err)
			continue
		}
		if _, err := s.db.Exec(ctx, `UPDATE stack_deployment_steps SET release_run = '' WHERE id = ? AND release_run = ?`, p.stepID, p.runID); err != nil {
			s.logger.Error("recording a released plan", "step", p.stepID, "error", err)
		}
	}
}

// groupStatus derives a deployment group's status from its runs.
func groupStatus(runs []*DeploymentRun) (GroupStatus, StatusCounts) {
	var sc StatusCounts
	for _, r := range runs {
		switch r.Status {
		case RunPending:
			sc.Pending++
		case RunPreDeploying:
			sc.PreDeploying++
		case RunPreDeployingPendingOperator, RunDeployingPendingOperator:
			sc.PendingOperator++
		case RunAcquiringLock:
			sc.AcquiringLock++
		case RunDeploying:
			sc.Deploying++
		case RunSucceeded:
			sc.Succeeded++
		case RunFailed:
			sc.Failed++
		case RunAbandoned:
			sc.Abandoned++
		}
	}
	switch {
	case len(runs) == 0 || sc.Pending == len(runs):
		return GroupPending, sc
	case sc.Failed > 0:
		return GroupFailed, sc
	case sc.Succeeded == len(runs):
		return GroupSucceeded, sc
	case sc.Succeeded+sc.Abandoned == len(runs):
		return GroupAbandoned, sc
	}
	return GroupDeploying, sc
}

// GroupStatus derives a group's status and counts from its runs (pending
// while it has none).
func (s *Service) GroupStatus(ctx context.Context, g *Group) (GroupStatus, StatusCounts) {
	runs, err := store.All(ctx, s.db, scanRun, `SELECT `+runCols+runFrom+` WHERE r.group_id = ? ORDER BY r.created_at`, g.ID)
	if err != nil {
		s.logger.Error("reading a deployment group's runs", "group", g.ID, "error", err)
		return g.Status, StatusCounts{}
	}
	if len(runs) == 0 {
		return GroupPending, StatusCounts{Pending: len(g.Config.Deployments)}
	}
	return groupStatus(runs)
}

// Step artifacts (go-tfe's StackDeploymentStepArtifactType).
const (
	ArtifactPlanDescription  = "plan-description"
	ArtifactPlanDebugLog     = "plan-debug-log"
	ArtifactApplyDescription = "apply-description"
	ArtifactApplyDebugLog    = "apply-debug-log"
)

// StepArtifact returns an artifact of a step the caller can see: the plan
// artifacts of the plan a step made or applied, the apply artifacts of an
// apply step.
func (s *Service) StepArtifact(ctx context.Context, stepID, name string) ([]byte, error) {
	st, r, err := s.GetStep(ctx, stepID)
	if err != nil {
		return nil, err
	}
	switch name {
	case ArtifactPlanDescription, ArtifactPlanDebugLog:
	case ArtifactApplyDescription, ArtifactApplyDebugLog:
		if !applies(st.Operation) {
			return nil, core.NotFound("step %s is a %s step: it has no %s", st.ID, st.Operation, name)
		}
	case "":
		return nil, core.BadRequest("the name query parameter is required: one of plan-description, plan-debug-log, apply-description, apply-debug-log")
	default:
		return nil, core.BadRequest("unknown artifact %q: use plan-description, plan-debug-log, apply-description or apply-debug-log", name)
	}
	if st.TFERunID == "" || s.exec == nil {
		return nil, core.NotFound("step %s has no %s yet", st.ID, name)
	}
	b, err := s.exec.Artifact(ctx, r.Organization, st.TFERunID, name)
	if core.KindOf(err) == core.KindNotFound {
		return nil, core.NotFound("step %s has no %s yet", st.ID, name)
	}
	return b, err
}

// Rerun makes a new deployment run, with the group's configuration, for
// each named deployment of the group (go-tfe's StackDeploymentGroups.Rerun;
// HCP Terraform reruns a deployment, for drift or after a failure, without
// a new configuration). Only the configuration a deployment last completed
// with can be rerun, and not while a run of it is unfinished.
func (s *Service) Rerun(ctx context.Context, groupID string, deployments []string) error {
	g, err := s.GetGroup(ctx, groupID)
	if err != nil {
		return err
	}
	if err := canApprove(ctx, g.Organization, g.ProjectID); err != nil {
		return err
	}
	if len(deployments) == 0 {
		return core.BadRequest("the deployments query parameter is required: the names of the group's deployments to rerun, comma-separated")
	}
	// A deployment its configuration's selection left out has no earlier
	// run in the group to take the mode from: the configuration says it.
	var declared *Config
	c, err := loadConfig(ctx, s.db, g.ConfigurationID, false)
	if err != nil {
		return err
	}
	if len(c.Selected) > 0 {
		st, err := loadStack(ctx, s.db, c.StackID, false)
		if err != nil {
			return err
		}
		var diags Diagnostics
		if declared, diags = s.parseArchive(ctx, c.blobKey, st.WorkingDirectory); diags.HasErrors() {
			return fmt.Errorf("reading configuration %s: %w", c.ID, diags.Err())
		}
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		stackID, speculative := c.StackID, c.Speculative
		now := nowUTC()
		for _, name := range deployments {
			if !slices.Contains(g.Config.Deployments, name) {
				return core.Invalid("deployment %q is not in deployment group %s (it has %s)", name, g.Name, strings.Join(g.Config.Deployments, ", "))
			}
			var last string
			var removed bool
			err := tx.QueryRow(ctx, `SELECT last_configuration_id, removed FROM stack_deployments WHERE stack_id = ? AND name = ?`+store.ForUpdate(tx),
				stackID, name).Scan(&last, &removed)
			if err != nil && !store.IsNoRows(err) {
				return err
			}
			// A speculative configuration's plans may be rerun at any
			// time (they change nothing), one at a time per deployment;
			// the runs of the others only for a deployment's latest
			// configuration, while the deployment has no run going.
			if !speculative && (err != nil || removed || last != g.ConfigurationID) {
				return core.Conflict("deployment %s has a newer configuration than %s: only the latest can be rerun", name, g.ConfigurationID)
			}
			var busy int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM stack_deployment_runs r JOIN stack_configurations c ON c.id = r.stack_configuration_id
				WHERE r.stack_id = ? AND r.deployment_name = ? AND c.speculative = ? AND (r.stack_configuration_id = ? OR NOT c.speculative)
				AND r.status NOT IN ('succeeded', 'failed', 'abandoned')`,
				stackID, name, speculative, g.ConfigurationID).Scan(&busy); err != nil {
				return err
			}
			if busy > 0 {
				return core.Conflict("deployment %s still has an unfinished run; rerun it once that run ends", name)
			}
			mode := ModeNormal
			var prev string
			err = tx.QueryRow(ctx, `SELECT mode FROM stack_deployment_runs WHERE group_id = ? AND deployment_name = ? ORDER BY created_at DESC, id DESC LIMIT 1`,
				g.ID, name).Scan(&prev)
			switch {
			case err == nil:
				mode = prev
			case !store.IsNoRows(err):
				return err
			case declared != nil && declared.Deployment(name) != nil:
				mode = runMode(c, declared.Deployment(name))
			}
			r := &DeploymentRun{ID: core.NewID(PrefixRun), StackID: stackID, ConfigurationID: g.ConfigurationID, Deployment: name, GroupID: g.ID,
				Status: RunPending, Mode: mode, Timestamps: map[string]time.Time{"pending-at": now}, CreatedAt: now, UpdatedAt: now, Speculative: speculative}
			if err := s.newRun(ctx, tx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil {
		s.nudge()
	}
	return err
}
