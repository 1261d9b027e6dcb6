package stack

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// ConfigStatus is the status of a stack configuration (go-tfe's
// StackConfigurationStatus).
type ConfigStatus string

// Configuration statuses. A configuration is created pending, becomes
// preparing when its archive arrives, and ends completed (its files parsed
// cleanly) or failed (with diagnostics). "queued" exists in the API and is
// not used: Terrace prepares an upload as soon as it arrives.
const (
	ConfigPending   ConfigStatus = "pending"
	ConfigQueued    ConfigStatus = "queued"
	ConfigPreparing ConfigStatus = "preparing"
	ConfigCompleted ConfigStatus = "completed"
	ConfigFailed    ConfigStatus = "failed"
)

// configTransitions is the configuration lifecycle: every status change
// goes through transitionConfig, which consults this table only.
var configTransitions = map[ConfigStatus][]ConfigStatus{
	ConfigPending:   {ConfigPreparing, ConfigFailed},
	ConfigPreparing: {ConfigCompleted, ConfigFailed},
}

// Final reports whether no transition leaves the status.
func (s ConfigStatus) Final() bool { return len(configTransitions[s]) == 0 }

func (s ConfigStatus) can(to ConfigStatus) bool {
	for _, t := range configTransitions[s] {
		if t == to {
			return true
		}
	}
	return false
}

// transitionConfig moves c to status to and stamps the time, or refuses.
func transitionConfig(c *Configuration, to ConfigStatus) error {
	if !c.Status.can(to) {
		return fmt.Errorf("stack configuration %s cannot go from %s to %s", c.ID, c.Status, to)
	}
	now := nowUTC()
	switch to {
	case ConfigPreparing:
		c.Timestamps.PreparingAt = &now
	case ConfigCompleted:
		c.Timestamps.CompletedAt = &now
	case ConfigFailed:
		c.Timestamps.ErroredAt = &now
	}
	c.Status, c.UpdatedAt = to, now
	return nil
}

// GroupStatus is the status of a deployment group (go-tfe's
// DeploymentGroupStatus). Groups stay pending until deployment runs exist.
type GroupStatus string

// Deployment group statuses.
const (
	GroupPending   GroupStatus = "pending"
	GroupDeploying GroupStatus = "deploying"
	GroupSucceeded GroupStatus = "succeeded"
	GroupFailed    GroupStatus = "failed"
	GroupAbandoned GroupStatus = "abandoned"
)

// RunStatus is the status of a deployment run (go-tfe's
// DeploymentRunStatus).
type RunStatus string

// Deployment run statuses.
const (
	RunPending                     RunStatus = "pending"
	RunPreDeploying                RunStatus = "pre-deploying"
	RunPreDeployingPendingOperator RunStatus = "pre-deploying-pending-operator"
	RunAcquiringLock               RunStatus = "acquiring-lock"
	RunDeploying                   RunStatus = "deploying"
	RunDeployingPendingOperator    RunStatus = "deploying-pending-operator"
	RunSucceeded                   RunStatus = "succeeded"
	RunFailed                      RunStatus = "failed"
	RunAbandoned                   RunStatus = "abandoned"
)

// runTransitions is the deployment run lifecycle (docs/design/stacks.md
// draws it). A run plans without the deployment's lock (pre-deploying),
// waits for approval unless auto-approved, queues for the lock in approval
// order, then holds it through every apply and re-plan until a plan is
// empty (deploying). Every status change goes through transitionRun, and
// is written by saveStatus (a run's first, pending, by newRun), in a
// transaction whose OnRunStatus hooks hear it.
var runTransitions = map[RunStatus][]RunStatus{
	RunPending:                     {RunPreDeploying, RunFailed, RunAbandoned},
	RunPreDeploying:                {RunPreDeployingPendingOperator, RunAcquiringLock, RunSucceeded, RunFailed, RunAbandoned},
	RunPreDeployingPendingOperator: {RunAcquiringLock, RunFailed, RunAbandoned},
	RunAcquiringLock:               {RunDeploying, RunFailed, RunAbandoned},
	RunDeploying:                   {RunDeployingPendingOperator, RunSucceeded, RunFailed, RunAbandoned},
	RunDeployingPendingOperator:    {RunDeploying, RunFailed, RunAbandoned},
}

// Final reports whether no transition leaves the status.
func (s RunStatus) Final() bool { return len(runTransitions[s]) == 0 }

// ParseRunStatus accepts the hyphenated statuses and the underscored
// spelling of HCP Terraform's documentation samples.
func ParseRunStatus(s string) RunStatus {
	return RunStatus(strings.ReplaceAll(s, "_", "-"))
}

func transitionRun(r *DeploymentRun, to RunStatus) error {
	if !slices.Contains(runTransitions[r.Status], to) {
		return fmt.Errorf("deployment run %s cannot go from %s to %s", r.ID, r.Status, to)
	}
	now := nowUTC()
	if r.Timestamps == nil {
		r.Timestamps = map[string]time.Time{}
	}
	r.Timestamps[string(to)+"-at"] = now
	r.Status, r.UpdatedAt = to, now
	return nil
}

// StepStatus is the status of a deployment step (go-tfe's
// DeploymentStepStatus).
type StepStatus string

// Deployment step statuses.
const (
	StepQueued          StepStatus = "queued"
	StepRunning         StepStatus = "running"
	StepPendingOperator StepStatus = "pending-operator"
	StepCompleted       StepStatus = "completed"
	StepFailed          StepStatus = "failed"
	StepAbandoned       StepStatus = "abandoned"
	StepBlocked         StepStatus = "blocked"
)

// stepTransitions is the step lifecycle: a step runs, may wait for an
// operator (a plan with changes), and ends completed, failed or abandoned.
var stepTransitions = map[StepStatus][]StepStatus{
	StepQueued:          {StepRunning, StepAbandoned},
	StepRunning:         {StepPendingOperator, StepCompleted, StepFailed, StepAbandoned},
	StepPendingOperator: {StepCompleted, StepFailed, StepAbandoned},
}

// Final reports whether no transition leaves the status.
func (s StepStatus) Final() bool { return len(stepTransitions[s]) == 0 }

func transitionStep(st *Step, to StepStatus) error {
	if !slices.Contains(stepTransitions[st.Status], to) {
		return fmt.Errorf("deployment step %s cannot go from %s to %s", st.ID, st.Status, to)
	}
	now := nowUTC()
	if st.Timestamps == nil {
		st.Timestamps = map[string]time.Time{}
	}
	st.Timestamps[string(to)+"-at"] = now
	st.Status, st.UpdatedAt = to, now
	return nil
}
