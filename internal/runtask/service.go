package runtask

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/forward"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Workspaces shows the service the workspaces tasks attach to.
type Workspaces interface {
	// Organization returns the organization of a workspace the caller in
	// ctx may see, and core.NotFound otherwise.
	Organization(ctx context.Context, workspaceID string) (string, error)
}

// AgentPools finds agent pools (a task may name one for request
// forwarding).
type AgentPools interface {
	// PoolOrganization returns the organization of a pool the caller may
	// see, and core.NotFound otherwise.
	PoolOrganization(ctx context.Context, id string) (string, error)
	// KeepPool keeps pool id of organization org from being deleted
	// until q's transaction ends (core.Invalid when org has no such pool,
	// or has it no more).
	KeepPool(ctx context.Context, q store.Q, org, id string) error
}

// RunInfo is what a task request says of a run.
type RunInfo struct {
	ID, Message, CreatedBy, ConfigVersionID, PlanID string
	CreatedAt                                       time.Time
	Speculative                                     bool
	WorkspaceID, WorkspaceName, WorkingDirectory    string
	Organization                                    string
	// The repository, branch, commit and pull request of a run of a
	// commit ("" for others).
	VCSRepoURL, VCSBranch, VCSCommitURL, VCSPullRequestURL string
}

// Runs is the run domain as run tasks see it.
type Runs interface {
	// RunInfo describes a run, whoever asks.
	RunInfo(ctx context.Context, runID string) (RunInfo, error)
	// StageDone moves a run on once its stage ended (run.Service).
	StageDone(ctx context.Context, runID string, stage run.TaskStage, outcome run.StageOutcome, msg string) error
	// WaitsAtStage reports whether the run still waits at the stage.
	WaitsAtStage(ctx context.Context, runID string, stage run.TaskStage) (bool, error)
}

// Tokens mints and deletes the access tokens of task results (auth).
type Tokens interface {
	CreateToken(ctx context.Context, q store.Q, n auth.NewToken) (*auth.Token, string, error)
	DeleteTokens(ctx context.Context, q store.Q, kind auth.Kind, subject string) error
}

// Options configure a Service.
type Options struct {
	DB         *store.DB
	Workspaces Workspaces
	AgentPools AgentPools
	Runs       Runs
	Tokens     Tokens
	Logger     *slog.Logger
	// BaseURL is the server's https://host, for the links in requests.
	BaseURL string
	// Timeout bounds one request to a task service. Defaults to 10s.
	Timeout time.Duration
	// ProgressTimeout errors a result that was accepted (or reported
	// running) and then reported nothing for this long. Defaults to 10m.
	ProgressTimeout time.Duration
	// TotalTimeout errors a result that has no final status this long
	// after its stage started. Defaults to 60m.
	TotalTimeout time.Duration
	// Backoff is the wait after a first refused request; it doubles up
	// to a minute. Defaults to 1s.
	Backoff time.Duration
	// MaxAttempts ends retrying a request: the result errors. Defaults
	// to 5.
	MaxAttempts int
	// Poll is how often the delivery loop looks for timeouts. Defaults
	// to 1s.
	Poll time.Duration
	// HTTP sends requests; defaults to a client without a global timeout
	// (each request gets Timeout).
	HTTP *http.Client
	// Keys seals HMAC keys at rest (HMACKeyColumn); nil stores them as
	// given (unit tests without a server).
	Keys *seal.Keyring
	// Policies adds policy evaluations to post-plan stages; nil runs
	// tasks only.
	Policies PolicyChecks
	// Forwards sends the requests of tasks with an agent pool through the
	// pool's agents; nil refuses agent pools.
	Forwards Forwarder
}

// Forwarder sends a request through an agent of a pool and returns the
// service's answer (internal/forward).
type Forwarder interface {
	Do(ctx context.Context, pool, url string, header map[string]string, body []byte) (forward.Result, error)
}

// Service manages run tasks, their workspace attachments, and the task
// stages and results of runs.
type Service struct {
	o         Options
	requests  *outbox.Queue // the requests to task services (deliver.go)
	onAttempt []func(AttemptOutcome)
	// repairSince is when the delivery loop's last repair pass started,
	// less a margin (zero: look at every stage).
	repairSince time.Time
	// beforeMove, in tests only, runs between a callback's read of its
	// result and the move made on what it read (attempt counts from 1).
	beforeMove func(attempt int)
}

// AttemptOutcome is what came of one request to a task service.
type AttemptOutcome string

// Attempt outcomes.
const (
	AttemptAccepted AttemptOutcome = "accepted" // the service answered 200
	AttemptRetry    AttemptOutcome = "retry"    // refused or unreachable: sent again later
	AttemptErrored  AttemptOutcome = "errored"  // refused on the last attempt: the result errors
)

// OnAttempt registers fn to hear the outcome of every task request this
// process sends (metrics). Call it before Run; fn must be quick.
func (s *Service) OnAttempt(fn func(AttemptOutcome)) { s.onAttempt = append(s.onAttempt, fn) }

func (s *Service) attempted(o AttemptOutcome) {
	for _, fn := range s.onAttempt {
		fn(o)
	}
}

// NewService validates o and returns a service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Workspaces == nil || o.AgentPools == nil || o.Runs == nil || o.Tokens == nil {
		return nil, errors.New("runtask: DB, Workspaces, AgentPools, Runs and Tokens are required")
	}
	if o.ProgressTimeout <= 0 {
		o.ProgressTimeout = 10 * time.Minute
	}
	if o.TotalTimeout <= 0 {
		o.TotalTimeout = 60 * time.Minute
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 5
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{}
	}
	s := &Service{o: o}
	var err error
	s.requests, err = s.newRequestQueue()
	return s, err
}

// List returns the organization's tasks.
func (s *Service) List(ctx context.Context, org string) ([]*Task, error) {
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		return nil, err
	}
	return store.All(ctx, s.o.DB, taskScanner(s.o.Keys), `SELECT `+taskCols+` FROM run_tasks WHERE organization_name = ? ORDER BY created_at, id`, org)
}

// Get returns a task the caller may see.
func (s *Service) Get(ctx context.Context, id string) (*Task, error) {
	t, err := loadTask(ctx, s.o.DB, s.o.Keys, id)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: t.Organization}); err != nil {
		return nil, core.NotFoundAs(err, "run task %q not found", id)
	}
	return t, nil
}

// Create adds a task to an organization. The task's URL is verified
// first: a test request that must be answered 200. When that fails
// nothing is saved.
func (s *Service) Create(ctx context.Context, org string, c TaskChanges) (*Task, error) {
	if err := authz.Allows(ctx, authz.OrgManageRunTasks, authz.Resource{Organization: org}); err != nil {
		return nil, err
	}
	now := core.Now()
	t := &Task{ID: core.NewID(PrefixTask), Organization: org, Enabled: true, Global: Global{Stages: []Stage{}, EnforcementLevel: Advisory},
		CreatedAt: now, UpdatedAt: now}
	if err := s.apply(ctx, t, c); err != nil {
		return nil, err
	}
	if err := s.verify(ctx, t); err != nil {
		return nil, err
	}
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepPool(ctx, tx, t); err != nil {
			return err
		}
		return insertTask(ctx, tx, s.o.Keys, t)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// keepPool, in the transaction q that writes t, keeps t's agent pool from
// being deleted before q commits (agent.Service.Delete counts the tasks
// naming it, UsingPool, after locking it): one deleted since apply
// checked it is refused as unknown.
func (s *Service) keepPool(ctx context.Context, q store.Q, t *Task) error {
	if t.AgentPoolID == "" {
		return nil
	}
	return s.o.AgentPools.KeepPool(ctx, q, t.Organization, t.AgentPoolID)
}

// apply sets the given changes on t and validates the result.
func (s *Service) apply(ctx context.Context, t *Task, c TaskChanges) error {
	if c.AgentPoolID != nil && *c.AgentPoolID != "" {
		org, err := s.o.AgentPools.PoolOrganization(ctx, *c.AgentPoolID)
		if err != nil || org != t.Organization {
			return core.Invalid("The provided agent pool does not exist in organization %s", t.Organization)
		}
		if s.o.Forwards == nil {
			return core.Invalid("run tasks cannot use an agent pool here: this server has no request forwarding")
		}
	}
	if c.AgentPoolID != nil {
		t.AgentPoolID = *c.AgentPoolID
	}
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&t.Name, c.Name)
	set(&t.URL, c.URL)
	set(&t.Description, c.Description)
	set(&t.Category, c.Category)
	set(&t.hmacKey, c.HMACKey)
	if c.Enabled != nil {
		t.Enabled = *c.Enabled
	}
	if g := c.Global; g != nil {
		if g.Enabled != nil {
			t.Global.Enabled = *g.Enabled
		}
		if g.Stages != nil {
			t.Global.Stages = stagesOrEmpty(*g.Stages)
		}
		if g.EnforcementLevel != nil {
			t.Global.EnforcementLevel = *g.EnforcementLevel
		}
	}
	if t.Global.Enabled && len(t.Global.Stages) == 0 {
		return core.Invalid("a global run task needs at least one stage in global-configuration.stages")
	}
	return validateTask(t)
}

// Update changes a task. A new URL or HMAC key is verified before it is
// saved.
func (s *Service) Update(ctx context.Context, id string, c TaskChanges) (*Task, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManageRunTasks, authz.Resource{Organization: t.Organization}); err != nil {
		return nil, err
	}
	oldURL, oldKey, oldPool := t.URL, t.hmacKey, t.AgentPoolID
	if err := s.apply(ctx, t, c); err != nil {
		return nil, err
	}
	// Another pool is another path to the service: verified again.
	if t.URL != oldURL || t.hmacKey != oldKey || t.AgentPoolID != oldPool {
		if err := s.verify(ctx, t); err != nil {
			return nil, err
		}
	}
	t.UpdatedAt = core.Now()
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if err := s.keepPool(ctx, tx, t); err != nil {
			return err
		}
		return updateTask(ctx, tx, s.o.Keys, t)
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Delete removes a task that no workspace uses.
func (s *Service) Delete(ctx context.Context, id string) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := authz.Allows(ctx, authz.OrgManageRunTasks, authz.Resource{Organization: t.Organization}); err != nil {
		return err
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM workspace_run_tasks WHERE task_id = ?`, t.ID).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return core.Conflict("run task %s is attached to %d workspace(s): remove it from them first", t.Name, n)
		}
		_, err := tx.Exec(ctx, `DELETE FROM run_tasks WHERE id = ?`, t.ID)
		return err
	})
}

// WorkspaceTasksOf returns the workspace attachments of a task (the
// workspace_tasks include).
func (s *Service) WorkspaceTasksOf(ctx context.Context, t *Task) ([]*WorkspaceTask, error) {
	return store.All(ctx, s.o.DB, scanWorkspaceTask, `SELECT `+wsTaskCols+` FROM workspace_run_tasks WHERE task_id = ? ORDER BY created_at, id`, t.ID)
}

// ListWorkspaceTasks returns the tasks attached to a workspace.
func (s *Service) ListWorkspaceTasks(ctx context.Context, workspaceID string) ([]*WorkspaceTask, error) {
	if _, err := s.o.Workspaces.Organization(ctx, workspaceID); err != nil {
		return nil, err
	}
	return store.All(ctx, s.o.DB, scanWorkspaceTask, `SELECT `+wsTaskCols+` FROM workspace_run_tasks WHERE workspace_id = ? ORDER BY created_at, id`, workspaceID)
}

// GetWorkspaceTask returns one attachment of a workspace the caller may
// see.
func (s *Service) GetWorkspaceTask(ctx context.Context, workspaceID, id string) (*WorkspaceTask, error) {
	if _, err := s.o.Workspaces.Organization(ctx, workspaceID); err != nil {
		return nil, err
	}
	return loadWorkspaceTask(ctx, s.o.DB, workspaceID, id)
}

// manageWorkspace checks that the caller may change the workspace's run
// tasks and returns its organization.
func (s *Service) manageWorkspace(ctx context.Context, workspaceID string) (string, error) {
	org, err := s.o.Workspaces.Organization(ctx, workspaceID)
	if err != nil {
		return "", err
	}
	return org, authz.Allows(ctx, authz.WorkspaceManageRunTasks, authz.Resource{Organization: org, WorkspaceID: workspaceID})
}

// stagesOf resolves the stages of a create or update: Stages, else the
// deprecated Stage, else (on create) post_plan.
func stagesOf(c WorkspaceTaskChanges, current []Stage) ([]Stage, error) {
	out := current
	switch {
	case c.Stages != nil:
		out = *c.Stages
	case c.Stage != nil:
		out = []Stage{*c.Stage}
	}
	if len(out) == 0 {
		out = []Stage{PostPlan}
	}
	return out, validateStages(out)
}

// AttachTask attaches a task of the workspace's organization to it.
func (s *Service) AttachTask(ctx context.Context, workspaceID string, c WorkspaceTaskChanges) (*WorkspaceTask, error) {
	org, err := s.manageWorkspace(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if c.TaskID == "" {
		return nil, core.Invalid("relationships.task is required")
	}
	t, err := loadTask(ctx, s.o.DB, s.o.Keys, c.TaskID)
	if err != nil || t.Organization != org {
		return nil, core.Invalid("run task %q does not exist in organization %s", c.TaskID, org)
	}
	if c.EnforcementLevel == nil {
		return nil, core.Invalid("enforcement-level is required (advisory or mandatory)")
	}
	if err := validateEnforcement(*c.EnforcementLevel); err != nil {
		return nil, err
	}
	stages, err := stagesOf(c, nil)
	if err != nil {
		return nil, err
	}
	w := &WorkspaceTask{ID: core.NewID(PrefixWorkspaceTask), TaskID: t.ID, WorkspaceID: workspaceID,
		EnforcementLevel: *c.EnforcementLevel, Stages: stages, CreatedAt: core.Now()}
	_, err = s.o.DB.Exec(ctx, `INSERT INTO workspace_run_tasks (`+wsTaskCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		w.ID, w.TaskID, w.WorkspaceID, string(w.EnforcementLevel), jsonText(w.Stages), core.Micros(w.CreatedAt))
	if store.IsUniqueViolation(s.o.DB, err) {
		return nil, core.Invalid("run task %s is already attached to workspace %s", t.Name, workspaceID)
	}
	if err != nil {
		return nil, err
	}
	return w, nil
}

// UpdateWorkspaceTask changes the enforcement level or stages of an
// attachment.
func (s *Service) UpdateWorkspaceTask(ctx context.Context, workspaceID, id string, c WorkspaceTaskChanges) (*WorkspaceTask, error) {
	if _, err := s.manageWorkspace(ctx, workspaceID); err != nil {
		return nil, err
	}
	w, err := loadWorkspaceTask(ctx, s.o.DB, workspaceID, id)
	if err != nil {
		return nil, err
	}
	if c.EnforcementLevel != nil && *c.EnforcementLevel != "" {
		if err := validateEnforcement(*c.EnforcementLevel); err != nil {
			return nil, err
		}
		w.EnforcementLevel = *c.EnforcementLevel
	}
	if w.Stages, err = stagesOf(c, w.Stages); err != nil {
		return nil, err
	}
	_, err = s.o.DB.Exec(ctx, `UPDATE workspace_run_tasks SET enforcement_level = ?, stages = ? WHERE id = ?`,
		string(w.EnforcementLevel), jsonText(w.Stages), w.ID)
	if err != nil {
		return nil, err
	}
	return w, nil
}

// DetachTask removes a task from a workspace.
func (s *Service) DetachTask(ctx context.Context, workspaceID, id string) error {
	if _, err := s.manageWorkspace(ctx, workspaceID); err != nil {
		return err
	}
	w, err := loadWorkspaceTask(ctx, s.o.DB, workspaceID, id)
	if err != nil {
		return err
	}
	_, err = s.o.DB.Exec(ctx, `DELETE FROM workspace_run_tasks WHERE id = ?`, w.ID)
	return err
}
