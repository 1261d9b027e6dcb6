package run

import (
	"fmt"
	"slices"
	"strings"
)

// Status is a run's status, spelled as HCP Terraform spells it.
type Status string

// Run statuses. The ones marked "stage" are entered only when a stage (run
// tasks, policy checks) is configured for the run; the core pipeline skips
// them.
const (
	Pending                  Status = "pending"
	PrePlanRunning           Status = "pre_plan_running"   // stage
	PrePlanCompleted         Status = "pre_plan_completed" // stage
	PlanQueued               Status = "plan_queued"
	Planning                 Status = "planning"
	Planned                  Status = "planned"
	PostPlanRunning          Status = "post_plan_running"           // stage
	PostPlanAwaitingDecision Status = "post_plan_awaiting_decision" // stage
	PostPlanCompleted        Status = "post_plan_completed"         // stage
	PolicyChecking           Status = "policy_checking"             // stage
	PolicyChecked            Status = "policy_checked"              // stage
	PolicyOverride           Status = "policy_override"             // stage
	PolicySoftFailed         Status = "policy_soft_failed"          // stage, final
	PlannedAndFinished       Status = "planned_and_finished"
	PlannedAndSaved          Status = "planned_and_saved"
	Confirmed                Status = "confirmed"
	PreApplyRunning          Status = "pre_apply_running"   // stage
	PreApplyCompleted        Status = "pre_apply_completed" // stage
	ApplyQueued              Status = "apply_queued"
	Applying                 Status = "applying"
	PostApplyRunning         Status = "post_apply_running"   // stage
	PostApplyCompleted       Status = "post_apply_completed" // stage
	Applied                  Status = "applied"
	Discarded                Status = "discarded"
	Errored                  Status = "errored"
	Canceled                 Status = "canceled"
	ForceCanceled            Status = "force_canceled"
)

// transitions is the whole run state machine: from each status, the
// statuses a run may move to. Every status change goes through
// (*Run).transition, which checks this table. docs/design/runs.md draws it.
var transitions = map[Status][]Status{
	Pending:                  {PrePlanRunning, PlanQueued, Discarded, Canceled, Errored},
	PrePlanRunning:           {PrePlanCompleted, Errored, Canceled},
	PrePlanCompleted:         {PlanQueued, Canceled, Errored},
	PlanQueued:               {Planning, Canceled, Errored},
	Planning:                 {Planned, PlannedAndFinished, PlanQueued, Errored, Canceled, ForceCanceled},
	Planned:                  {PostPlanRunning, PolicyChecking, PlannedAndFinished, PlannedAndSaved, Confirmed, ApplyQueued, Discarded, Canceled, Errored},
	PolicyChecking:           {PolicyChecked, PolicyOverride, PolicySoftFailed, Errored, Canceled},
	PolicyChecked:            {PostPlanRunning, PlannedAndFinished, PlannedAndSaved, Confirmed, ApplyQueued, Discarded, Canceled},
	PolicyOverride:           {PolicyChecked, Discarded, Canceled},
	PostPlanRunning:          {PostPlanCompleted, PostPlanAwaitingDecision, Errored, Canceled},
	PostPlanAwaitingDecision: {PostPlanCompleted, Discarded, Canceled, Errored},
	PostPlanCompleted:        {PlannedAndFinished, PlannedAndSaved, Confirmed, ApplyQueued, Discarded, Canceled},
	PlannedAndSaved:          {Confirmed, Discarded, Canceled, Errored},
	Confirmed:                {PreApplyRunning, ApplyQueued, Canceled, Errored},
	PreApplyRunning:          {PreApplyCompleted, Errored, Canceled},
	PreApplyCompleted:        {ApplyQueued, Canceled, Errored},
	ApplyQueued:              {Applying, Canceled, Errored},
	Applying:                 {PostApplyRunning, Applied, Errored, Canceled, ForceCanceled},
	PostApplyRunning:         {PostApplyCompleted, Errored},
	PostApplyCompleted:       {Applied},
}

// Final reports whether no further transition is possible.
func (s Status) Final() bool {
	_, ok := transitions[s]
	return !ok
}

// Confirmable reports whether the run waits for a user to apply it.
func (s Status) Confirmable() bool {
	switch s {
	case Planned, PolicyChecked, PostPlanCompleted, PlannedAndSaved, PolicyOverride:
		return true
	}
	return false
}

// Cancelable reports whether a run can be canceled: while something is
// queued or executing.
func (s Status) Cancelable() bool {
	switch s {
	case Pending, PrePlanRunning, PrePlanCompleted, PlanQueued, Planning, PolicyChecking,
		PostPlanRunning, Confirmed, PreApplyRunning, PreApplyCompleted, ApplyQueued, Applying:
		return true
	}
	return false
}

// Discardable reports whether a run can be discarded: while it waits for a
// decision.
func (s Status) Discardable() bool {
	return s == Pending || s.Confirmable() || s == PostPlanAwaitingDecision
}

// HoldsWorkspace reports whether a (non-speculative) run in this status is
// the workspace's active run: everything between leaving the queue and
// reaching a final or resting-final state. A saved plan does not hold it
// (as in HCP Terraform): the runs behind it go on, and applying it takes
// the workspace again, unless a run changed the state first, which
// discards it.
func (s Status) HoldsWorkspace() bool {
	return s != Pending && s != PlannedAndSaved && !s.Final()
}

// finals lists the final statuses, read from the transition table.
func finals() []Status {
	seen := map[Status]bool{}
	var out []Status
	for _, tos := range transitions {
		for _, to := range tos {
			if to.Final() && !seen[to] {
				seen[to] = true
				out = append(out, to)
			}
		}
	}
	slices.Sort(out)
	return out
}

// statuses lists every status of the state machine: those that the
// transition table leads from or to.
func statuses() []Status {
	seen := map[Status]bool{}
	var out []Status
	for from, tos := range transitions {
		for _, s := range append([]Status{from}, tos...) {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// statusesWhere lists the statuses for which pred holds: how SQL status
// sets are made from the methods below instead of written a second time.
func statusesWhere(pred func(Status) bool) []Status {
	var out []Status
	for _, s := range statuses() {
		if pred(s) {
			out = append(out, s)
		}
	}
	return out
}

// sqlStatuses renders statuses as an SQL list: ('a','b'). Status values
// are the constants above, never input.
func sqlStatuses(ss ...Status) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, s := range ss {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("'" + string(s) + "'")
	}
	b.WriteByte(')')
	return b.String()
}

// notHolding are the statuses in which a non-speculative run does not
// hold its workspace (HoldsWorkspace false), as an SQL list.
var notHolding = sqlStatuses(append(finals(), Pending, PlannedAndSaved)...)

// notAhead are the statuses of runs that no longer count in the queue, as
// an SQL list: final ones and saved plans.
var notAhead = sqlStatuses(append(finals(), PlannedAndSaved)...)

// Executing reports whether a runner is (or is about to be) working on it.
func (s Status) Executing() bool {
	return s.Queued() || s.Running()
}

// Queued reports whether the run waits for a runner to take its phase.
func (s Status) Queued() bool { return s == PlanQueued || s == ApplyQueued }

// Running reports whether a runner executes the run's phase.
func (s Status) Running() bool { return s == Planning || s == Applying }

// The executing, queued, running and final statuses as SQL lists.
var (
	sqlExecuting = sqlStatuses(statusesWhere(Status.Executing)...)
	sqlFinal     = sqlStatuses(finals()...)
	sqlQueued    = sqlStatuses(statusesWhere(Status.Queued)...)
	sqlRunning   = sqlStatuses(statusesWhere(Status.Running)...)
)

// ErrBadTransition is returned for a move the state machine forbids.
type ErrBadTransition struct{ From, To Status }

func (e *ErrBadTransition) Error() string {
	return fmt.Sprintf("a run cannot go from %s to %s", e.From, e.To)
}

func allowed(from, to Status) bool { return slices.Contains(transitions[from], to) }

// PhaseStatus is the status of a plan or an apply.
type PhaseStatus string

// Plan and apply statuses.
const (
	PhasePending     PhaseStatus = "pending"
	PhaseQueued      PhaseStatus = "queued"
	PhaseRunning     PhaseStatus = "running"
	PhaseFinished    PhaseStatus = "finished"
	PhaseErrored     PhaseStatus = "errored"
	PhaseCanceled    PhaseStatus = "canceled"
	PhaseUnreachable PhaseStatus = "unreachable"
)

// Done reports whether the phase will not change any more.
func (s PhaseStatus) Done() bool {
	return s == PhaseFinished || s == PhaseErrored || s == PhaseCanceled || s == PhaseUnreachable
}
