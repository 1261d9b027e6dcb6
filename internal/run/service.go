package run

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Workspace is what runs need to know about a workspace.
type Workspace struct {
	ID, Name, Organization, ProjectID string
	AgentPool                         string // name of the agent pool of an agent-mode workspace
	AgentPoolID                       string // its ID: the workspace's jobs go to that pool's agents only
	TerraformVersion                  string
	WorkingDirectory                  string
	ExecutionMode                     string
	AutoApply                         bool
	StructuredRunOutput               bool
}

// Workspaces is the workspace domain as runs see it.
type Workspaces interface {
	// Get returns a workspace the caller in ctx may see (404 otherwise).
	Get(ctx context.Context, id string) (*Workspace, error)
	// System returns a workspace without an access check (scheduler, runners).
	System(ctx context.Context, id string) (*Workspace, error)
	// SystemIn is System reading through q: inside a transaction, its Tx
	// (on PostgreSQL a transaction that reads on a second connection waits
	// for a free one while it holds its own: a burst of them, as many as
	// the pool has connections, waits until the requests time out).
	SystemIn(ctx context.Context, q store.Q, id string) (*Workspace, error)
	// Identity returns a workspace's ID, name, organization and project
	// (and its own settings), without an access check and without what
	// costs more queries (the effective execution mode and agent pool,
	// left empty): what observers of run transitions are given.
	Identity(ctx context.Context, id string) (*Workspace, error)
	// Readable is Identity for a caller that may see the workspace (404
	// otherwise, as Get): the workspace domain's access check without the
	// statements of the effective execution mode.
	Readable(ctx context.Context, id string) (*Workspace, error)
	// ReadableSQL selects the runs of org's workspaces the caller in ctx
	// may read (the workspace list's rule): a condition over a run's
	// workspace ID written runs.workspace_id, with its arguments, "" when
	// every workspace of org is readable. each, when not nil, is the test
	// to apply to each run's workspace instead (the caller's reach is
	// decided workspace by workspace: a run token's).
	ReadableSQL(ctx context.Context, org string) (cond string, args []any, each func(workspaceID string) bool, err error)
	// LockForRun makes runID the workspace's lock holder inside q's
	// transaction; false when someone else holds the lock.
	LockForRun(ctx context.Context, q store.Q, workspaceID, runID string) (bool, error)
	// LockQueue takes the workspace's row lock for the rest of q's
	// transaction (PostgreSQL; nothing on SQLite): the run domain takes
	// it before it reads the queue in a transaction that holds no run of
	// the workspace yet (a created run, a user's unlock), so that it and
	// the transaction of a run that ends (whose unlock writes the row)
	// go one after the other.
	LockQueue(ctx context.Context, q store.Q, workspaceID string) error
	// UnlockForRunSQL is the statement that releases a lock held by
	// runID (a no-op otherwise); the run domain sends it with its own
	// writes (on PostgreSQL, one statement: updateRunWith).
	UnlockForRunSQL(workspaceID, runID string) (string, []any)
}

// ConfigVersion is what runs need to know about a configuration version.
type ConfigVersion struct {
	ID, WorkspaceID, Status string
	Speculative             bool
}

// ConfigVersions is the configuration-version domain as runs see it.
type ConfigVersions interface {
	// Get returns a configuration version (no access check: the caller
	// already saw its workspace).
	Get(ctx context.Context, id string) (*ConfigVersion, error)
	// Latest returns the workspace's newest uploaded configuration version.
	Latest(ctx context.Context, workspaceID string) (*ConfigVersion, error)
}

// Options configure the service.
type Options struct {
	DB         *store.DB
	Blobs      *blob.Store
	Signer     *blob.Signer
	Workspaces Workspaces
	Configs    ConfigVersions
	Logger     *slog.Logger
	// LeaseTTL is how long a runner's claim lasts without a heartbeat.
	// Defaults to 30s.
	LeaseTTL time.Duration
	// ForceCancelAfter is how long after a cancel a force-cancel becomes
	// available. Defaults to 10s.
	ForceCancelAfter time.Duration
	// Stages are the run tasks between the phases (nil: none).
	Stages TaskStages
	// Keys seals the runs' variables (VariablesColumn); nil stores them
	// as given.
	Keys *seal.Keyring
	// ClosedOrganizationsSQL, when set, is a query with one column, name,
	// listing the organizations whose jobs no runner claims (those a site
	// admin has disabled): their jobs stay queued until it lists them no
	// more (Resume wakes the runners then).
	ClosedOrganizationsSQL string
}

// Service runs the run lifecycle.
type Service struct {
	Options
	wake         *loops.Wake // nudges in-process runners: a job was queued
	claimWaiters             // long-polling claims (claimwait.go)
	mu           sync.Mutex
	signals      map[string]chan Signal // run id -> cancel signals for in-process runners
	// observing: run id -> closed when the observers told later
	// (changedLater) are done; under mu.
	observing map[string]chan struct{}
	// jobsQueued counts the jobs queuePhase added: a write that changed
	// it wakes the claims (see nudgeIfQueued), any other does not.
	jobsQueued atomic.Uint64
	onChange   []func(ctx context.Context, r *Run)
	observers  []func(ctx context.Context, t Transition)

	// assessWake nudges the assessment runner: an assessment was queued.
	assessWake chan struct{}

	// planJSONWait bounds a read of a plan's JSON that is still being
	// made (PlanJSONWait); onPlanJSONWait, when set (tests), hears each
	// wait of such a read.
	planJSONWait   time.Duration
	onPlanJSONWait func()
	// onReport, when set (tests), is called by a runner's report once it
	// has read the job's run, before it stores anything.
	onReport func()
}

// NewService returns a run service.
func NewService(o Options) *Service {
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.ForceCancelAfter == 0 {
		o.ForceCancelAfter = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{Options: o, wake: loops.NewWake(), assessWake: make(chan struct{}, 1), signals: map[string]chan Signal{},
		planJSONWait: PlanJSONWait}
}

// OnChange registers a function called after every committed status
// change with the run as it is now.
func (s *Service) OnChange(fn func(ctx context.Context, r *Run)) { s.onChange = append(s.onChange, fn) }

// Transition is one committed status change of a run: From is "" for a
// run just created (To is then pending, or further when it was queued at
// once). Run is the run after the whole transaction; Workspace is its
// workspace's identity (Workspaces.Identity: no execution mode or agent
// pool).
type Transition struct {
	Run       *Run
	Workspace *Workspace
	From, To  Status
}

// Observe registers fn to be called after every committed transition, in
// order, once per status a run passed through. It is the one subscription
// point for features that follow runs (notifications, run triggers, run
// tasks): fn runs in the caller's goroutine (or, where a runner waits
// for the answer, a claim or a plan report that goes straight on to
// apply, in one of its own; still in order), so it must be quick and must
// hand slow work to its own queue.
func (s *Service) Observe(fn func(ctx context.Context, t Transition)) {
	s.observers = append(s.observers, fn)
}

// changed tells the observers of runs' committed transitions, after any
// told later (changedLater) for the same runs.
func (s *Service) changed(ctx context.Context, runs ...*Run) {
	for _, r := range runs {
		s.mu.Lock()
		prev := s.observing[r.ID]
		s.mu.Unlock()
		if prev != nil {
			<-prev
		}
	}
	s.tell(ctx, runs...)
}

// changedLater is changed in a goroutine of its own: the caller (a plan
// report whose runner goes on to apply at once) answers without waiting
// for the observers' queries. The next change of the same run waits for
// it, so observers still see each run's transitions in order.
func (s *Service) changedLater(ctx context.Context, r *Run) {
	done := make(chan struct{})
	s.mu.Lock()
	prev := s.observing[r.ID]
	if s.observing == nil {
		s.observing = map[string]chan struct{}{}
	}
	s.observing[r.ID] = done
	s.mu.Unlock()
	ctx = context.WithoutCancel(ctx)
	go func() {
		defer func() {
			s.mu.Lock()
			if s.observing[r.ID] == done {
				delete(s.observing, r.ID)
			}
			s.mu.Unlock()
			close(done)
		}()
		if prev != nil {
			<-prev
		}
		s.tell(ctx, r)
	}()
}

func (s *Service) tell(ctx context.Context, runs ...*Run) {
	for _, r := range runs {
		for _, fn := range s.onChange {
			fn(ctx, r)
		}
		moves := r.moves
		r.moves = nil
		if len(moves) == 0 || len(s.observers) == 0 {
			continue
		}
		ws := r.ws // read by the request that created the run, if it did
		if ws == nil {
			var err error
			if ws, err = s.Workspaces.Identity(ctx, r.WorkspaceID); err != nil {
				s.Logger.Warn("reading the workspace of a run transition", "run", r.ID, "error", err)
				ws = &Workspace{ID: r.WorkspaceID, Organization: r.Organization}
			}
		}
		for _, m := range moves {
			for _, fn := range s.observers {
				fn(ctx, Transition{Run: r, Workspace: ws, From: m.from, To: m.to})
			}
		}
	}
}

// Wake returns the channel on which in-process runners are nudged.
func (s *Service) Wake() <-chan struct{} { return s.wake.C() }

// Wakes is the runners' wake-up: the server announces it to other
// replicas (a job was queued) and wakes it when they announce theirs.
func (s *Service) Wakes() *loops.Wake { return s.wake }

func (s *Service) nudge() {
	s.wake.Signal()
	s.wakeClaims()
}

// nudgeIfQueued nudges the runners when a job was queued since the count
// was before (read before the write that may have queued one). A write
// that queued nothing wakes nobody: on PostgreSQL each wake-up costs
// every idle claim a transaction and every replica a notification, and
// the runners would compete with the run that is executing.
func (s *Service) nudgeIfQueued(before uint64) {
	if s.jobsQueued.Load() != before {
		s.nudge()
	}
}

// Resume wakes the runners of every replica when jobs already queued may
// be claimed again (an organization enabled again: ClosedOrganizationsSQL
// no longer lists it).
func (s *Service) Resume() { s.nudge() }

// WakeLocal wakes this replica's runners and long-polling claims (agents'
// included) after another replica announced a queued job.
func (s *Service) WakeLocal() {
	s.wake.Local()
	s.wakeClaims()
}

func (s *Service) wakeClaims() { s.rouseWaiters() }

// CreateOptions are the attributes of a new run.
type CreateOptions struct {
	WorkspaceID            string
	ConfigurationVersionID string
	Message                *string
	IsDestroy              *bool
	Refresh                *bool
	RefreshOnly            *bool
	PlanOnly               *bool
	SavePlan               *bool
	AutoApply              *bool
	AllowEmptyApply        *bool
	AllowConfigGeneration  *bool
	DebuggingMode          *bool
	TerraformVersion       *string
	TargetAddrs            []string
	ReplaceAddrs           []string
	InvokeActionAddrs      []string
	PolicyPaths            []string
	Variables              []RunVar
	Source                 string
	TriggerReason          string
	// FromCLI: the request came from terraform's cloud backend (Run.FromCLI).
	FromCLI bool
	// TextLog: the client cannot render JSON log lines (Run.TextLog).
	TextLog bool
}

func val[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func actorOf(ctx context.Context) string {
	p := auth.FromContext(ctx)
	switch {
	case p == nil:
		return ""
	case p.UserID != "":
		return p.UserID
	case p.TeamID != "":
		return p.TeamID
	case p.RunID != "":
		return p.RunID
	}
	return p.TokenID
}

// Create queues a run the caller in ctx may start: the authorization
// model decides it (authz.CreateRunAction: plan permission for a run that
// only plans, apply permission for one that may apply), whoever calls.
// It is POST /runs' one decision: the API's guard only locates the
// workspace (authz.Route.ServiceDecides).
func (s *Service) Create(ctx context.Context, o CreateOptions) (*Run, error) {
	return s.create(ctx, o, true)
}

// CreateSystem queues a run without asking the model, for a run the server
// starts on its own account once the domain that starts it has decided:
// a no-code workspace's first run (after ProjectProvisionNoCode), a stack
// deployment's runs (after StackManage or StackApprove, made with an
// organization principal, which never runs terraform itself). The caller
// in ctx is still the run's creator.
func (s *Service) CreateSystem(ctx context.Context, o CreateOptions) (*Run, error) {
	return s.create(ctx, o, false)
}

func (s *Service) create(ctx context.Context, o CreateOptions, check bool) (*Run, error) {
	if o.WorkspaceID == "" {
		return nil, core.Invalid("a run needs a workspace relationship")
	}
	ws, err := s.Workspaces.Get(ctx, o.WorkspaceID)
	if err != nil {
		return nil, err
	}
	// The configuration version, and whether the run only plans, are
	// known before anything is checked: what the model is asked depends
	// on them. Their errors wait for its answer.
	var cv *ConfigVersion
	var cvErr error
	if o.ConfigurationVersionID != "" {
		cv, err = s.Configs.Get(ctx, o.ConfigurationVersionID)
		if err != nil {
			cv = nil
		}
		if err != nil || cv.WorkspaceID != ws.ID {
			cvErr = core.NotFound("configuration version %s not found in workspace %s", o.ConfigurationVersionID, ws.ID)
		}
	} else if cv, err = s.Configs.Latest(ctx, ws.ID); err != nil {
		cv, cvErr = nil, core.Invalid("workspace %q has no uploaded configuration version to run", ws.Name)
	}
	onlyPlans := val(o.PlanOnly, false) || cv != nil && cv.Speculative
	if check {
		// Before anything else is checked: a caller who may not start
		// runs here learns nothing of the workspace's execution mode, its
		// configuration versions or what it asked. A version of another
		// workspace still says whether the run would only plan, so that
		// the answer (refused, or not found) is the one it always was.
		if err := authz.Allows(ctx, authz.CreateRunAction(onlyPlans), authz.Resource{Organization: ws.Organization, ProjectID: ws.ProjectID, WorkspaceID: ws.ID}); err != nil {
			return nil, err
		}
	}
	if ws.ExecutionMode == "local" {
		return nil, core.Conflict("workspace %q uses local execution: runs execute where terraform runs, not on Terrace", ws.Name)
	}
	if cvErr != nil {
		return nil, cvErr
	}
	if cv.Status != "uploaded" {
		return nil, core.Invalid("configuration version %s is %s, not uploaded", cv.ID, cv.Status)
	}
	r := &Run{
		ID:                     core.NewID(core.PrefixRun),
		WorkspaceID:            ws.ID,
		Organization:           ws.Organization,
		ConfigurationVersionID: cv.ID,
		Status:                 Pending,
		Timestamps:             Stamps{},
		Message:                val(o.Message, "Triggered via API"),
		IsDestroy:              val(o.IsDestroy, false),
		Refresh:                val(o.Refresh, true),
		RefreshOnly:            val(o.RefreshOnly, false),
		PlanOnly:               onlyPlans,
		SavePlan:               val(o.SavePlan, false),
		AutoApply:              val(o.AutoApply, ws.AutoApply),
		AllowEmptyApply:        val(o.AllowEmptyApply, false),
		AllowConfigGeneration:  val(o.AllowConfigGeneration, false),
		DebuggingMode:          val(o.DebuggingMode, false),
		TargetAddrs:            o.TargetAddrs,
		ReplaceAddrs:           o.ReplaceAddrs,
		InvokeActionAddrs:      o.InvokeActionAddrs,
		PolicyPaths:            o.PolicyPaths,
		Variables:              o.Variables,
		TerraformVersion:       val(o.TerraformVersion, ws.TerraformVersion),
		Source:                 o.Source,
		TriggerReason:          o.TriggerReason,
		FromCLI:                o.FromCLI,
		TextLog:                o.TextLog,
		CreatedBy:              actorOf(ctx),
		ws:                     ws,
		// Its workspace's project is known: neither its task stages nor
		// the response's permissions read the workspace again.
		wsProject:      ws.ProjectID,
		wsProjectKnown: ws.ProjectID != "",
		Plan:           Phase{ID: core.NewID(core.PrefixPlan), Status: PhasePending, Timestamps: Stamps{}},
		Apply:          Phase{ID: core.NewID(core.PrefixApply), Status: PhasePending, Timestamps: Stamps{}},
	}
	if r.Source == "" {
		r.Source = "tfe-api"
	}
	if r.TriggerReason == "" {
		r.TriggerReason = "manual"
	}
	if r.IsDestroy && r.RefreshOnly {
		return nil, core.Invalid("is-destroy and refresh-only cannot both be true")
	}
	if r.RefreshOnly && !r.Refresh {
		return nil, core.Invalid("refresh-only needs refresh")
	}
	if o.TerraformVersion != nil && !r.PlanOnly && *o.TerraformVersion != ws.TerraformVersion {
		return nil, core.Invalid("terraform-version can only be set for plan-only runs")
	}
	for _, v := range r.Variables {
		if v.Key == "" {
			return nil, core.Invalid("every run variable needs a key")
		}
	}
	r.CreatedAt = core.Now()
	r.UpdatedAt = r.CreatedAt
	r.Timestamps.set("plan-queueable-at", r.CreatedAt)
	var queued []*Run
	jobs := s.jobsQueued.Load()
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		queued = nil
		if !r.PlanOnly && s.Workspaces != nil {
			// Before the insert, so that the run's row is never held
			// while the workspace's is waited for.
			if err := s.Workspaces.LockQueue(ctx, tx, r.WorkspaceID); err != nil {
				return err
			}
		}
		if err := insertCreatedRun(ctx, tx, s.Keys, r, "Run created"); err != nil {
			return err
		}
		if s.Stages != nil {
			stages, err := s.Stages.Prepare(ctx, tx, r)
			if err != nil {
				return err
			}
			// In the run's doc from its next write, below.
			r.TaskStages, r.TaskStagesKnown = stages, true
		}
		if r.PlanOnly {
			// Speculative plans never wait for the workspace.
			if err := s.enterPlan(ctx, tx, r); err != nil {
				return err
			}
			queued = append(queued, r)
			return nil
		}
		var err error
		if queued, err = s.scheduleNew(ctx, tx, r); err != nil {
			return err
		}
		if !slices.Contains(queued, r) && r.TaskStagesKnown {
			// Pending behind another run: the row still needs the stages.
			return updateRun(ctx, tx, r)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.nudgeIfQueued(jobs)
	// The new run comes first, as created, then its own moves (if it was
	// queued at once: scheduleNew moved r itself, not a copy read from the
	// table, so r is what the transaction stored).
	r.moves = append([]move{{"", Pending}}, r.moves...)
	runs := []*Run{r}
	for _, q := range queued {
		if q != r {
			runs = append(runs, q)
		}
	}
	out := r.clone()
	s.changed(ctx, runs...)
	out.moves, out.stored, out.storedIn = nil, "", nil
	return out, nil
}

// queuePhase moves a run into plan_queued or apply_queued and adds its job.
func (s *Service) queuePhase(ctx context.Context, q store.Q, r *Run, phase JobPhase) error {
	if phase == PhasePlan {
		if err := r.transition(PlanQueued); err != nil {
			return err
		}
		r.Plan.setPhase(PhaseQueued)
	} else {
		if err := r.transition(ApplyQueued); err != nil {
			return err
		}
		r.Apply.setPhase(PhaseQueued)
	}
	pool := ""
	if !r.Assessment {
		// The workspace's agent pool, read in q's transaction, or in the
		// request that created the run and queues it now.
		ws := r.ws
		if ws == nil {
			var err error
			if ws, err = s.Workspaces.SystemIn(ctx, q, r.WorkspaceID); err != nil {
				return err
			}
		}
		if ws.ExecutionMode == "agent" {
			pool = ws.AgentPoolID
			if pool == "" {
				pool = NoPool
			}
			name := ws.AgentPool
			if name == "" {
				name = "(none: set the workspace's agent pool)"
			}
			if err := addEvent(ctx, q, r.ID, EventWaitingForAgent, fmt.Sprintf("The %s is waiting for an agent of pool %s: the workspace runs on agents only.", phase, name), ""); err != nil {
				return err
			}
		}
	}
	// The run and its job in one statement on PostgreSQL.
	now := core.Micros(core.Now())
	err := updateRunWith(ctx, q, r, write{`INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, created_at, updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?)`,
		[]any{core.NewID("job"), r.ID, string(phase), string(queueOf(r)), pool, now, now}})
	if err == nil {
		s.jobsQueued.Add(1)
	}
	return err
}

// EventWaitingForAgent is the run event of a job queued for an agent pool.
const EventWaitingForAgent = "waiting-for-agent"

// NoPool is the pool of the jobs of an agent-mode workspace without an
// agent pool: no agent claims them until the workspace names one.
const NoPool = "apool-none"

// schedule starts the next pending run of a workspace when no other run
// holds it: the workspace lock is taken for the run, which serializes
// concurrent schedulers. It returns the runs it changed.
func (s *Service) schedule(ctx context.Context, tx store.Q, workspaceID string) ([]*Run, error) {
	return s.scheduleFrom(ctx, tx, workspaceID, nil)
}

// scheduleFrom is schedule; created, when set, is a run this transaction
// holds in memory, used instead of its row when it is the one to start.
func (s *Service) scheduleFrom(ctx context.Context, tx store.Q, workspaceID string, created *Run) ([]*Run, error) {
	// One query: the oldest pending run, unless a run holds the
	// workspace. Both read the queue's index (runs_queue, queueWhere), not
	// the history: a holder is in the queue (notHolding is the statuses
	// out of the queue, notAhead, and pending). The run is locked as it is
	// read: one canceled or discarded meanwhile is read as that
	// transaction left it (skipped, on PostgreSQL for the next pending
	// one), not started over it.
	next, err := listRuns(ctx, tx, s.Keys, `workspace_id = ? AND `+queueWhere+` AND status = ?
		AND NOT EXISTS (SELECT 1 FROM runs a WHERE a.workspace_id = ? AND NOT a.plan_only AND a.status NOT IN `+notAhead+` AND a.status NOT IN `+notHolding+`)
		ORDER BY created_at, id LIMIT 1`+store.ForUpdate(tx), workspaceID, string(Pending), workspaceID)
	if err != nil || len(next) == 0 {
		return nil, err
	}
	r := next[0]
	if created != nil && created.ID == r.ID {
		r = created
	}
	ok, err := s.Workspaces.LockForRun(ctx, tx, workspaceID, r.ID)
	if err != nil || !ok {
		return nil, err
	}
	if err := s.enterPlan(ctx, tx, r); err != nil {
		return nil, err
	}
	return []*Run{r}, nil
}

// scheduleNew is schedule in the transaction that created r: when r is
// the run to start, r itself moves on (it carries what the transaction
// knows and the inserted row does not, such as its task stages), so that
// it is neither read back nor written twice.
func (s *Service) scheduleNew(ctx context.Context, tx store.Q, r *Run) ([]*Run, error) {
	return s.scheduleFrom(ctx, tx, r.WorkspaceID, r)
}

// Schedule starts the workspace's next pending run if it can (called when
// the workspace is unlocked by a user).
func (s *Service) Schedule(ctx context.Context, workspaceID string) error {
	var changed []*Run
	err := s.DB.Tx(ctx, func(tx *store.Tx) error {
		if err := s.Workspaces.LockQueue(ctx, tx, workspaceID); err != nil {
			return err
		}
		var err error
		changed, err = s.schedule(ctx, tx, workspaceID)
		return err
	})
	if err == nil && len(changed) > 0 {
		s.nudge()
		s.changed(ctx, changed...)
	}
	return err
}

// unlock is the write that releases r's hold on its workspace.
func (s *Service) unlock(r *Run) write {
	q, args := s.Workspaces.UnlockForRunSQL(r.WorkspaceID, r.ID)
	return write{q, args}
}

// release ends a run's hold on its workspace and starts the next run. more
// are writes of the caller's that go with the run's (updateRunWith): the
// run is written here, with them, when they are given.
func (s *Service) release(ctx context.Context, tx store.Q, r *Run, more ...write) ([]*Run, error) {
	if r.PlanOnly {
		if len(more) > 0 {
			return nil, updateRunWith(ctx, tx, r, more...)
		}
		return nil, nil
	}
	// The scheduler reads runs from the table: the ending run's status
	// must be there first, or it would still look like the active run;
	// and the workspace must be free.
	if err := updateRunWith(ctx, tx, r, append(more, s.unlock(r))...); err != nil {
		return nil, err
	}
	return s.schedule(ctx, tx, r.WorkspaceID)
}

func (s *Service) get(ctx context.Context, id string) (*Run, error) {
	return getRun(ctx, s.DB, s.Keys, "id", id, false)
}

// System returns a run without checking the caller, for the server's own
// work on behalf of the system.
func (s *Service) System(ctx context.Context, id string) (*Run, error) {
	return s.get(ctx, id)
}

// Get returns a run the caller may see. In a read-only request the
// authorization guard and the handler share one read of it (the request
// memo); each gets its own copy.
func (s *Service) Get(ctx context.Context, id string) (*Run, error) {
	if !core.HasPrefix(id, core.PrefixRun) {
		return nil, core.NotFound("run %s not found", id)
	}
	r, err := core.Memoize(ctx, "run:"+id, func() (*Run, error) { return s.readDocument(ctx, id) })
	if err != nil {
		return nil, err
	}
	r = r.clone()
	if err := auth.CheckOrganization(ctx, r.Organization); err != nil {
		return nil, core.NotFound("run %s not found", id)
	}
	return r, nil
}

// GetByPhase returns the run owning a plan or apply ID.
func (s *Service) GetByPhase(ctx context.Context, phaseID string) (*Run, error) {
	col := "plan_id"
	if core.HasPrefix(phaseID, core.PrefixApply) {
		col = "apply_id"
	} else if !core.HasPrefix(phaseID, core.PrefixPlan) {
		return nil, core.NotFound("%s not found", phaseID)
	}
	// The guard and the handler of a plan's or an apply's request share
	// one read (the request memo), which takes the workspace's project
	// along for the guard; each gets its own copy.
	r, err := core.Memoize(ctx, "run-phase:"+phaseID, func() (*Run, error) { return s.readByPhase(ctx, col, phaseID) })
	if err != nil {
		return nil, err
	}
	r = r.clone()
	if err := auth.CheckOrganization(ctx, r.Organization); err != nil {
		return nil, core.NotFound("%s not found", phaseID)
	}
	return r, nil
}

// readByPhase reads the run whose col (plan_id or apply_id) is id and,
// when the workspaces say it in SQL, its workspace's project in the same
// statement (Run.WorkspaceProject).
func (s *Service) readByPhase(ctx context.Context, col, id string) (*Run, error) {
	wp, ok := s.Workspaces.(WorkspaceProjectSQL)
	if !ok {
		return getRun(ctx, s.DB, s.Keys, col, id, false)
	}
	var project sql.NullString
	r, err := scanRunWith(s.Keys)(moreColumns{s.DB.QueryRow(ctx, `SELECT `+runCols+`, (`+wp.RunWorkspaceProjectSQL()+`) FROM runs WHERE `+col+` = ?`, id), []any{&project}})
	if store.IsNoRows(err) {
		return nil, core.NotFound("run %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	r.wsProject, r.wsProjectKnown = project.String, project.Valid
	return r, nil
}

// Queue returns the organization's runs that wait for or hold a runner,
// of the workspaces the caller may read.
func (s *Service) Queue(ctx context.Context, org string) ([]*Run, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	where, args, each, err := s.readableIn(ctx, org)
	if err != nil {
		return nil, err
	}
	runs, err := listRuns(ctx, s.DB, s.Keys, where+` AND status IN `+sqlExecuting+` ORDER BY created_at, id`, args...)
	if err != nil || each == nil {
		return runs, err
	}
	out := runs[:0]
	for _, r := range runs {
		if each(r.WorkspaceID) {
			out = append(out, r)
		}
	}
	return out, nil
}

// readableIn is the condition on the runs table selecting org's runs
// (assessments left out) on the workspaces the caller in ctx may read,
// with its arguments; each is the test to apply to each run's workspace
// when the model decides workspace by workspace (nil otherwise).
func (s *Service) readableIn(ctx context.Context, org string) (where string, args []any, each func(workspaceID string) bool, err error) {
	where, args = `organization_name = ? AND assessment = ?`, []any{org, false}
	cond, cargs, each, err := s.Workspaces.ReadableSQL(ctx, org)
	if err != nil {
		return "", nil, nil, err
	}
	if cond != "" {
		where, args = where+` AND `+cond, append(args, cargs...)
	}
	return where, args, each, nil
}

// Capacity counts an organization's queued and executing runs.
func (s *Service) Capacity(ctx context.Context, org string) (pending, running int, err error) {
	err = s.DB.QueryRow(ctx, `SELECT
		COALESCE(SUM(CASE WHEN status IN `+sqlQueued+` THEN 1 ELSE 0 END), 0),
		COALESCE(SUM(CASE WHEN status IN `+sqlRunning+` THEN 1 ELSE 0 END), 0)
		FROM runs WHERE organization_name = ? AND assessment = ?`, org, false).Scan(&pending, &running)
	return pending, running, err
}

// PositionInQueue is how many runs of the workspace go before a pending run.
func (s *Service) PositionInQueue(ctx context.Context, r *Run) int {
	if r.Status != Pending || r.PlanOnly {
		return 0
	}
	var n int
	_ = s.DB.QueryRow(ctx, `SELECT COUNT(*) FROM runs WHERE workspace_id = ? AND `+queueWhere+` AND created_at < ?`,
		r.WorkspaceID, core.Micros(r.CreatedAt)).Scan(&n)
	return n
}

// currentRunSQL picks a workspace's current run over its id written as
// the given expression, as HCP Terraform keeps it: the head of the
// workspace's queue (the run that holds the workspace, or the pending run
// that takes it next, say while a user holds the lock), and when nothing
// is queued, the newest run. A run waiting behind another is not current:
// terraform's cloud backend counts a pending run's position in the queue
// down to the current run, and takes a pending current run on a locked
// workspace for one waiting for a user's unlock. The head is one step of
// the queue's partial index (runs_queue, queueWhere), the newest one of
// the history's (runs_workspace_list).
func currentRunSQL(ws string) string {
	return `COALESCE((SELECT id FROM runs WHERE workspace_id = ` + ws + ` AND ` + queueWhere + ` ORDER BY created_at, id LIMIT 1),
		(SELECT id FROM runs WHERE workspace_id = ` + ws + ` AND assessment = FALSE ORDER BY created_at DESC, id DESC LIMIT 1))`
}

// CurrentRunID returns the workspace's current run ("" when none; see
// currentRunSQL).
func (s *Service) CurrentRunID(ctx context.Context, workspaceID string) (string, error) {
	var id sql.NullString
	err := s.DB.QueryRow(ctx, `SELECT `+currentRunSQL("?"), workspaceID, workspaceID).Scan(&id)
	return id.String, err
}

// CurrentRunIDSQL says CurrentRunID in SQL over a workspace's id written
// ws.id (workspace.CurrentRunsSQL).
func (s *Service) CurrentRunIDSQL() string {
	return `SELECT ` + currentRunSQL("ws.id")
}

// CurrentRunCreatedAtSQL says CurrentRunCreatedAt in SQL over a
// workspace's id written ws.id, NULL for none (workspace.RunHistorySQL).
func (s *Service) CurrentRunCreatedAtSQL() string {
	return `SELECT created_at FROM runs WHERE id = ` + currentRunSQL("ws.id")
}

// CurrentRunStatusSQL is the status of a workspace's current run in SQL
// over its id written ws.id, NULL for none (workspace.RunHistorySQL).
func (s *Service) CurrentRunStatusSQL() string {
	return `SELECT status FROM runs WHERE id = ` + currentRunSQL("ws.id")
}

// RunsCountSQL says RunsCount in SQL over a workspace's id written ws.id
// (NULL: none).
func (s *Service) RunsCountSQL() string {
	return `SELECT runs FROM run_counts WHERE workspace_id = ws.id`
}

// RunWorkspace resolves a run token's workspace and organization.
func (s *Service) RunWorkspace(ctx context.Context, runID string) (string, string, error) {
	var ws, org, status string
	err := s.DB.QueryRow(ctx, `SELECT workspace_id, organization_name, status FROM runs WHERE id = ?`, runID).Scan(&ws, &org, &status)
	if store.IsNoRows(err) {
		return "", "", core.NotFound("run %s not found", runID)
	}
	if err == nil && Status(status).Final() {
		return "", "", core.Unauthorized("run %s has finished", runID)
	}
	return ws, org, err
}

// RunTokensSQL says in SQL what RunWorkspace answers, for the one query
// that authenticates a run token (internal/auth): every run with its
// workspace, organization, and 1 when it has finished (its token no
// longer works).
func (s *Service) RunTokensSQL() string {
	return `SELECT id, workspace_id, organization_name, CASE WHEN status IN ` + sqlFinal + ` THEN 1 ELSE 0 END AS final FROM runs`
}

// Events returns a run's history.
func (s *Service) Events(ctx context.Context, runID string) ([]*Event, error) {
	if _, err := s.Get(ctx, runID); err != nil {
		return nil, err
	}
	return listEvents(ctx, s.DB, runID)
}

// update runs fn on a locked run inside a transaction, saves it, and
// notifies listeners.
func (s *Service) update(ctx context.Context, id string, fn func(tx *store.Tx, r *Run) ([]*Run, error)) (*Run, error) {
	return s.updateWith(ctx, func(tx *store.Tx) (*Run, error) { return getRun(ctx, tx, s.Keys, "id", id, true) }, fn)
}

// updateWith is update with the locking read of the run given (read).
func (s *Service) updateWith(ctx context.Context, read func(tx *store.Tx) (*Run, error), fn func(tx *store.Tx, r *Run) ([]*Run, error)) (*Run, error) {
	r, changed, err := s.commitWith(ctx, read, fn)
	if err != nil {
		return nil, err
	}
	s.changed(ctx, changed...)
	return r, nil
}

// commitWith is updateWith without telling the observers: it returns the
// runs whose moves are committed (the run first), and the caller tells
// them, with changed or changedLater.
func (s *Service) commitWith(ctx context.Context, read func(tx *store.Tx) (*Run, error), fn func(tx *store.Tx, r *Run) ([]*Run, error)) (*Run, []*Run, error) {
	var r *Run
	var changed []*Run
	queued := s.jobsQueued.Load()
	err := s.DB.Tx(ctx, func(tx *store.Tx) error {
		var err error
		r, err = read(tx)
		if err != nil {
			return err
		}
		more, err := fn(tx, r)
		if err != nil {
			return err
		}
		if err := updateRun(ctx, tx, r); err != nil {
			return err
		}
		changed = append([]*Run{r}, more...)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	s.nudgeIfQueued(queued)
	return r, changed, nil
}

// Apply confirms a run that waits for it.
func (s *Service) Apply(ctx context.Context, id, comment string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	_, err := s.update(ctx, id, func(tx *store.Tx, r *Run) ([]*Run, error) {
		if !r.confirmable() {
			return nil, core.Conflict("run %s is %s and cannot be applied", r.ID, r.Status)
		}
		if r.Status == PlannedAndSaved {
			// A saved plan let the workspace go: take it again to apply.
			ok, err := s.Workspaces.LockForRun(ctx, tx, r.WorkspaceID, r.ID)
			if err != nil {
				return nil, err
			}
			if !ok {
				return nil, core.Conflict("the workspace of run %s is locked or busy with another run; apply the saved plan once it is free", r.ID)
			}
		}
		if err := r.transition(Confirmed); err != nil {
			return nil, err
		}
		r.ConfirmedBy = actorOf(ctx)
		if err := addEvent(ctx, tx, r.ID, "applied", comment, r.ConfirmedBy); err != nil {
			return nil, err
		}
		if err := commentIfAny(ctx, tx, r.ID, comment); err != nil {
			return nil, err
		}
		return nil, s.enterApply(ctx, tx, r)
	})
	return err
}

// Discard ends a run that waits for a decision, without applying it.
func (s *Service) Discard(ctx context.Context, id, comment string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	_, err := s.update(ctx, id, func(tx *store.Tx, r *Run) ([]*Run, error) {
		if !r.Status.Discardable() {
			return nil, core.Conflict("run %s is %s and cannot be discarded", r.ID, r.Status)
		}
		if err := r.transition(Discarded); err != nil {
			return nil, err
		}
		if err := addEvent(ctx, tx, r.ID, "discarded", comment, actorOf(ctx)); err != nil {
			return nil, err
		}
		if err := commentIfAny(ctx, tx, r.ID, comment); err != nil {
			return nil, err
		}
		return s.release(ctx, tx, r)
	})
	if err == nil {
		s.dropPlanFiles(ctx, id)
	}
	return err
}

// dropPlanFiles deletes the plan file and lock file a discarded run kept
// for its apply: it can never be applied now. The JSON plans stay.
func (s *Service) dropPlanFiles(ctx context.Context, runIDs ...string) {
	for _, id := range runIDs {
		r, err := s.get(ctx, id)
		if err != nil || r.Plan.ID == "" {
			continue
		}
		for _, name := range []string{"tfplan", "lock"} {
			_ = s.Blobs.Delete(ctx, planKey(r.Plan.ID, name))
		}
	}
}

// Cancel interrupts a run. A run not yet picked up by a runner ends at
// once; an executing one is interrupted by its runner (terraform gets
// SIGINT, then SIGKILL after a grace period) and ends when the runner says so.
func (s *Service) Cancel(ctx context.Context, id, comment string) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	_, err := s.update(ctx, id, func(tx *store.Tx, r *Run) ([]*Run, error) {
		if !r.Status.Cancelable() {
			return nil, core.Conflict("run %s is %s and cannot be canceled", r.ID, r.Status)
		}
		if err := addEvent(ctx, tx, r.ID, "canceled", comment, actorOf(ctx)); err != nil {
			return nil, err
		}
		if err := commentIfAny(ctx, tx, r.ID, comment); err != nil {
			return nil, err
		}
		if r.CancelRequestedAt.IsZero() {
			r.CancelRequestedAt = core.Now()
		}
		if r.Status == Planning || r.Status == Applying {
			_, err := tx.Exec(ctx, `UPDATE jobs SET signal = ?, updated_at = ? WHERE run_id = ? AND status = 'running'`, string(SignalCancel), core.Micros(core.Now()), r.ID)
			s.signal(tx, r.ID, SignalCancel)
			return nil, err
		}
		// Nothing executes yet: drop queued jobs and end the run.
		if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE run_id = ? AND status = 'queued'`, r.ID); err != nil {
			return nil, err
		}
		if err := r.transition(Canceled); err != nil {
			return nil, err
		}
		cancelPhases(r)
		return s.release(ctx, tx, r)
	})
	return err
}

// ForceCancel ends a run at once (after a cancel's grace period): the
// runner is told to kill terraform, and the workspace is released now.
func (s *Service) ForceCancel(ctx context.Context, id, comment string) error {
	return s.forceCancel(ctx, id, comment, true)
}

// forceCancel is ForceCancel; afterCancel false ends the run without the
// cancel (and its grace period) that must come first otherwise: a site
// administrator's force-cancel of a stuck run (AdminForceCancel).
func (s *Service) forceCancel(ctx context.Context, id, comment string, afterCancel bool) error {
	if _, err := s.Get(ctx, id); err != nil {
		return err
	}
	_, err := s.update(ctx, id, func(tx *store.Tx, r *Run) ([]*Run, error) {
		if r.Status.Final() {
			return nil, core.Conflict("run %s is %s and cannot be force-canceled", r.ID, r.Status)
		}
		if afterCancel && (r.CancelRequestedAt.IsZero() || core.Now().Before(r.CancelRequestedAt.Add(s.ForceCancelAfter))) {
			return nil, core.Conflict("run %s can be force-canceled only %s after a cancel", r.ID, s.ForceCancelAfter)
		}
		if err := addEvent(ctx, tx, r.ID, "force_canceled", comment, actorOf(ctx)); err != nil {
			return nil, err
		}
		if err := commentIfAny(ctx, tx, r.ID, comment); err != nil {
			return nil, err
		}
		s.signal(tx, r.ID, SignalForce)
		if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE run_id = ?`, r.ID); err != nil {
			return nil, err
		}
		r.force(Canceled) // skip the table: any state may end here
		r.Timestamps.set("force-canceled-at", core.Now())
		r.Timestamps.set("canceled-at", core.Now())
		cancelPhases(r)
		return s.release(ctx, tx, r)
	})
	return err
}

func cancelPhases(r *Run) {
	for _, p := range []*Phase{&r.Plan, &r.Apply} {
		if !p.Status.Done() {
			p.setPhase(PhaseCanceled)
		}
	}
}

// signal tells an in-process runner working on the run to stop.
func (s *Service) signal(_ store.Q, runID string, sig Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.signals[runID]; ok {
		select {
		case ch <- sig:
		default:
		}
	}
}

func (s *Service) fail(ctx context.Context, tx store.Q, r *Run, msg string) ([]*Run, error) {
	r.ErrorMessage = msg
	if !r.Status.Final() {
		r.force(Errored)
		r.Timestamps.set("errored-at", core.Now())
	}
	for _, p := range []*Phase{&r.Plan, &r.Apply} {
		if p.Status == PhaseRunning || p.Status == PhaseQueued {
			p.setPhase(PhaseErrored)
		}
	}
	if err := addEvent(ctx, tx, r.ID, "errored", msg, ""); err != nil {
		return nil, err
	}
	return s.release(ctx, tx, r)
}

// UsesConfigVersion reports whether a run references the configuration
// version (only runs that have not ended, with active).
func (s *Service) UsesConfigVersion(ctx context.Context, cvID string, active bool) (bool, error) {
	runs, err := listRuns(ctx, s.DB, s.Keys, `configuration_version_id = ?`, cvID)
	if err != nil {
		return false, err
	}
	for _, r := range runs {
		if !active || !r.Status.Final() {
			return true, nil
		}
	}
	return false, nil
}

// DeleteWorkspaceRuns removes a workspace's runs (with their events and
// jobs) inside the transaction that deletes the workspace. Their blobs
// (runBlobKeys) go to the ledger for the next Sweep, so a rolled-back
// deletion loses nothing; the chunks of a log still running (a phase
// that has not ended) go with the runs.
func DeleteWorkspaceRuns(ctx context.Context, q store.Q, workspaceID string) error {
	now := core.Micros(core.Now())
	for _, key := range runBlobKeys {
		if _, err := q.Exec(ctx, `INSERT INTO run_garbage (blob_key, not_before) SELECT `+key+`, ? FROM runs WHERE workspace_id = ? ON CONFLICT (blob_key) DO NOTHING`, now, workspaceID); err != nil {
			return err
		}
	}
	if _, err := q.Exec(ctx, `DELETE FROM log_chunks WHERE log_id IN (SELECT plan_id FROM runs WHERE workspace_id = ? UNION ALL SELECT apply_id FROM runs WHERE workspace_id = ?)`, workspaceID, workspaceID); err != nil {
		return err
	}
	if _, err := q.Exec(ctx, `DELETE FROM runs WHERE workspace_id = ?`, workspaceID); err != nil {
		return err
	}
	_, err := q.Exec(ctx, `DELETE FROM run_counts WHERE workspace_id = ?`, workspaceID)
	return err
}

// ForceExecute starts a pending run now: the runs ahead of it in its
// workspace's queue that wait (pending, or planned and waiting for a
// decision) are discarded, and the run takes the workspace. A run ahead
// that is executing must be canceled first: force-execute never interrupts
// terraform. A saved plan is not in the queue and stays.
//
// The rows are locked in the order a run's end takes them (its own row,
// then the workspace's, then the next pending run's), so that the two never
// wait on each other both ways: the runs that hold the workspace, then the
// workspace, then the pending runs up to this one. Locked, each is read as
// the last transaction that changed it left it (on PostgreSQL a run
// confirmed while this reads is seen confirmed, not discarded over).
func (s *Service) ForceExecute(ctx context.Context, id string) error {
	r, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	var changed []*Run
	for attempt := 0; ; attempt++ {
		err = s.DB.Tx(ctx, func(tx *store.Tx) error {
			changed = nil
			var err error
			changed, err = s.forceExecute(ctx, tx, r)
			return err
		})
		if !errors.Is(err, errHolderMoved) || attempt == 4 {
			break
		}
	}
	if errors.Is(err, errHolderMoved) {
		return core.Conflict("the runs of workspace %s kept moving; force-execute %s again", r.WorkspaceID, r.ID)
	}
	if err != nil {
		return err
	}
	s.nudge()
	s.changed(ctx, changed...)
	return nil
}

// errHolderMoved: a run started holding the workspace between the
// locking of the holders and of the workspace; forceExecute starts over.
var errHolderMoved = errors.New("the workspace's holder moved")

func (s *Service) forceExecute(ctx context.Context, tx *store.Tx, r *Run) ([]*Run, error) {
	holdersWhere := `workspace_id = ? AND ` + queueWhere + ` AND status <> ? ORDER BY created_at, id`
	holders, err := listRuns(ctx, tx, s.Keys, holdersWhere+store.ForUpdate(tx), r.WorkspaceID, string(Pending))
	if err != nil {
		return nil, err
	}
	if err := s.Workspaces.LockQueue(ctx, tx, r.WorkspaceID); err != nil {
		return nil, err
	}
	// A run can start holding only by writing the workspace's row, which
	// is now this transaction's: one that started since the holders were
	// read is not locked, and the locking order allows no second try.
	now, err := listRuns(ctx, tx, s.Keys, holdersWhere, r.WorkspaceID, string(Pending))
	if err != nil {
		return nil, err
	}
	if !sameRuns(holders, now) {
		return nil, errHolderMoved
	}
	created := core.Micros(r.CreatedAt)
	waiting, err := listRuns(ctx, tx, s.Keys, `workspace_id = ? AND `+queueWhere+` AND status = ?
		AND (created_at < ? OR (created_at = ? AND id <= ?)) ORDER BY created_at, id`+store.ForUpdate(tx),
		r.WorkspaceID, string(Pending), created, created, r.ID)
	if err != nil {
		return nil, err
	}
	if len(waiting) == 0 || waiting[len(waiting)-1].ID != r.ID {
		cur, err := getRun(ctx, tx, s.Keys, "id", r.ID, false)
		if err != nil {
			return nil, err
		}
		return nil, core.Conflict("run %s is %s: only a pending run can be force-executed", cur.ID, cur.Status)
	}
	var changed []*Run
	for _, o := range append(holders, waiting[:len(waiting)-1]...) {
		if !o.Status.Discardable() {
			return nil, core.Conflict("run %s is %s; cancel it before force-executing %s", o.ID, o.Status, r.ID)
		}
		if err := o.transition(Discarded); err != nil {
			return nil, err
		}
		if err := addEvent(ctx, tx, o.ID, "discarded", "Discarded by a force-execute of "+r.ID, actorOf(ctx)); err != nil {
			return nil, err
		}
		if err := updateRunWith(ctx, tx, o, s.unlock(o)); err != nil {
			return nil, err
		}
		changed = append(changed, o)
	}
	if err := addEvent(ctx, tx, r.ID, "force_executed", "", actorOf(ctx)); err != nil {
		return nil, err
	}
	started, err := s.schedule(ctx, tx, r.WorkspaceID)
	if err != nil {
		return nil, err
	}
	return append(changed, started...), nil
}

func sameRuns(a, b []*Run) bool {
	return slices.EqualFunc(a, b, func(x, y *Run) bool { return x.ID == y.ID })
}

// RunsCount is a workspace's number of runs (the workspace's
// workspace-kpis-runs-count): the counter insertRun keeps, so a workspace
// read does not count its whole history.
func (s *Service) RunsCount(ctx context.Context, workspaceID string) (int, error) {
	return runsCount(ctx, s.DB, workspaceID)
}

func runsCount(ctx context.Context, q store.Q, workspaceID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT runs FROM run_counts WHERE workspace_id = ?`, workspaceID).Scan(&n)
	if store.IsNoRows(err) {
		return 0, nil
	}
	return n, err
}
