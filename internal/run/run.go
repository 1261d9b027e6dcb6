// Package run is the run lifecycle: creating runs, the state machine
// (status.go), the per-workspace queue, the job queue that runners claim
// from, logs, and the HTTP API (runs, plans, applies, run events).
package run

import (
	"maps"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Run is one plan (and maybe apply) of a configuration version on a workspace.
type Run struct {
	ID                     string `json:"id"`
	WorkspaceID            string `json:"workspace_id"`
	Organization           string `json:"organization"`
	ConfigurationVersionID string `json:"configuration_version_id"`
	Status                 Status `json:"status"`
	Timestamps             Stamps `json:"timestamps"`
	Message                string `json:"message"`
	IsDestroy              bool   `json:"is_destroy"`
	Refresh                bool   `json:"refresh"`
	RefreshOnly            bool   `json:"refresh_only"`
	PlanOnly               bool   `json:"plan_only"`
	SavePlan               bool   `json:"save_plan"`
	AutoApply              bool   `json:"auto_apply"`
	AllowEmptyApply        bool   `json:"allow_empty_apply"`
	// AllowConfigGeneration: the plan writes configuration for the
	// import blocks that have none (terraform plan
	// -generate-config-out); the CLI takes it from the plan's JSON.
	AllowConfigGeneration bool      `json:"allow_config_generation,omitempty"`
	DebuggingMode         bool      `json:"debugging_mode,omitempty"` // terraform logs at TRACE level
	TargetAddrs           []string  `json:"target_addrs,omitempty"`
	ReplaceAddrs          []string  `json:"replace_addrs,omitempty"`
	InvokeActionAddrs     []string  `json:"invoke_action_addrs,omitempty"`
	PolicyPaths           []string  `json:"policy_paths,omitempty"`
	Variables             []RunVar  `json:"variables,omitempty"`
	TerraformVersion      string    `json:"terraform_version"`
	Source                string    `json:"source"`
	TriggerReason         string    `json:"trigger_reason"`
	HasChanges            bool      `json:"has_changes"`
	CreatedBy             string    `json:"created_by"`
	ConfirmedBy           string    `json:"confirmed_by,omitempty"`
	ErrorMessage          string    `json:"error_message,omitempty"`
	CreatedAt             time.Time `json:"created_at"`
	UpdatedAt             time.Time `json:"updated_at"`
	CancelRequestedAt     time.Time `json:"cancel_requested_at,omitzero"`
	Plan                  Phase     `json:"plan"`
	Apply                 Phase     `json:"apply"`
	// PlanJSONLater: the plan was reported without its JSON, which the
	// job that applies it makes and uploads (see SavePlanJSON): after the
	// apply was reported, or beside the apply for a FromCLI run; until
	// then the JSON is pending.
	PlanJSONLater bool `json:"plan_json_later,omitempty"`
	// FromCLI: terraform's (or OpenTofu's) cloud backend created the run
	// (it sends X-Terraform-Integration or Terraform-Version). Its CLI
	// reads the plan's redacted JSON as soon as the plan ends and shows
	// the plan before it streams the apply, so its JSON is made beside
	// the apply, not after it.
	FromCLI bool `json:"from_cli,omitempty"`
	// TextLog: the run's client prints its logs as they are and cannot
	// render terraform's JSON log lines (the older remote backend, or the
	// cloud backend of terraform before 1.4): its logs are text whatever
	// the workspace's structured run output (see TextLogFor).
	TextLog bool `json:"text_log,omitempty"`

	// Assessment marks a health assessment (a refresh-only plan started by
	// internal/assessment): left out of run lists and queue counts, its
	// job waits in QueueAssessments.
	Assessment bool `json:"assessment,omitempty"`

	// TaskStages are the task stages the run got when it was created
	// (TaskStages.Prepare), known when TaskStagesKnown: a run stored
	// before these were recorded asks the run task domain at every stage.
	TaskStages      []TaskStage `json:"task_stages,omitempty"`
	TaskStagesKnown bool        `json:"task_stages_known,omitempty"`

	// moves are the transitions made since the run was read, reported to
	// observers once they are committed (see Service.Observe).
	moves []move
	// stored is the doc this value last wrote (updateRun) and storedIn
	// the transaction it wrote it in: writing the same doc again in that
	// transaction is skipped, which saves a round trip where a
	// transaction writes the run before scheduling and then once more.
	stored   string
	storedIn store.Q
	// ws is the workspace as Create read it (with its effective execution
	// mode and agent pool), for queueing the run in the same request
	// without reading it again; nil for a run read from the store.
	ws *Workspace
	// wsProject is the project of the run's workspace as the run's read
	// found it (readDocument), when wsProjectKnown.
	wsProject      string
	wsProjectKnown bool
}

// WorkspaceProject returns the project of the run's workspace when the
// read that returned the run took it in the same statement (Service.Get
// in a request); ok is false otherwise (then ask the workspace domain).
func (r *Run) WorkspaceProject() (id string, ok bool) { return r.wsProject, r.wsProjectKnown }

type move struct{ from, to Status }

// RunVar is a variable given with the run; Value is an HCL expression.
// Sensitive values (a stack deployment's sensitive inputs) reach the
// runner only: the API shows them empty and the runner masks them in logs.
type RunVar struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// Redacted returns vars with sensitive values emptied, for showing.
func Redacted(vars []RunVar) []RunVar {
	out := make([]RunVar, 0, len(vars))
	for _, v := range vars {
		if v.Sensitive {
			v.Value = ""
		}
		out = append(out, v)
	}
	return out
}

// Phase is a run's plan or apply.
type Phase struct {
	ID           string      `json:"id"`
	Status       PhaseStatus `json:"status"`
	Timestamps   Stamps      `json:"timestamps"`
	HasChanges   bool        `json:"has_changes"`
	Additions    int         `json:"additions"`
	Changes      int         `json:"changes"`
	Destructions int         `json:"destructions"`
	Imports      int         `json:"imports"`
	// GeneratedConfig: the plan generated configuration for import
	// blocks (Run.AllowConfigGeneration), which its JSON carries.
	GeneratedConfig bool `json:"generated_config,omitempty"`
}

// Stamps records when a status was entered: "planning-at", "queued-at", ….
type Stamps map[string]time.Time

func (s Stamps) set(key string, t time.Time) { s[key] = t }

// clone returns a copy of r that shares nothing a caller could change.
func (r *Run) clone() *Run {
	c := *r
	c.Timestamps = maps.Clone(r.Timestamps)
	c.Plan.Timestamps = maps.Clone(r.Plan.Timestamps)
	c.Apply.Timestamps = maps.Clone(r.Apply.Timestamps)
	c.TargetAddrs = slices.Clone(r.TargetAddrs)
	c.ReplaceAddrs = slices.Clone(r.ReplaceAddrs)
	c.InvokeActionAddrs = slices.Clone(r.InvokeActionAddrs)
	c.PolicyPaths = slices.Clone(r.PolicyPaths)
	c.Variables = slices.Clone(r.Variables)
	c.TaskStages = slices.Clone(r.TaskStages)
	c.moves = slices.Clone(r.moves)
	return &c
}

// mayHaveStage reports whether the run may have a task stage at stage:
// false only when its stages are known and stage is not one of them.
func (r *Run) mayHaveStage(stage TaskStage) bool {
	return !r.TaskStagesKnown || slices.Contains(r.TaskStages, stage)
}

// Speculative reports whether the run is plan-only (it never holds the
// workspace and never applies).
func (r *Run) Speculative() bool { return r.PlanOnly }

// transition moves the run to a new status, checking the state machine and
// stamping the time.
func (r *Run) transition(to Status) error {
	if !allowed(r.Status, to) {
		return &ErrBadTransition{From: r.Status, To: to}
	}
	now := core.Now()
	r.moves = append(r.moves, move{r.Status, to})
	r.Status = to
	r.Timestamps.set(string(to)+"-at", now)
	r.UpdatedAt = now
	r.unreached()
	return nil
}

// unreached marks, once the run has ended, the phases it never started
// unreachable, as HCP Terraform does (a discarded or errored run's apply,
// a plan-only run's): clients that follow a phase's log (go-tfe's reader,
// terraform) wait for it to reach a final status. A canceled run's
// phases are canceled (cancelPhases).
func (r *Run) unreached() {
	if !r.Status.Final() || r.Status == Canceled {
		return
	}
	for _, p := range []*Phase{&r.Plan, &r.Apply} {
		if p.Status == PhasePending {
			p.setPhase(PhaseUnreachable)
		}
	}
}

// force moves the run to a final status whatever the table says (force
// cancel, failures found by the reaper); observers still see the move.
func (r *Run) force(to Status) {
	if r.Status == to {
		return
	}
	r.moves = append(r.moves, move{r.Status, to})
	r.Status = to
	r.unreached()
}

// setPhase moves a phase to a status and stamps it.
func (p *Phase) setPhase(s PhaseStatus) {
	p.Status = s
	if p.Timestamps == nil {
		p.Timestamps = Stamps{}
	}
	key := map[PhaseStatus]string{
		PhaseQueued: "queued-at", PhaseRunning: "started-at", PhaseFinished: "finished-at",
		PhaseErrored: "errored-at", PhaseCanceled: "canceled-at", PhaseUnreachable: "unreachable-at",
		PhasePending: "pending-at",
	}[s]
	p.Timestamps.set(key, core.Now())
}

// Actions a caller may take on the run now.
func (r *Run) confirmable() bool { return r.Status.Confirmable() && !r.PlanOnly }
