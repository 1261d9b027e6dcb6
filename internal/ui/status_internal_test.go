package ui

import (
	"testing"

	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/stack"
)

// Statuses read as HCP Terraform says them.
func TestStatusLabel(t *testing.T) {
	for in, want := range map[any]string{
		run.PlannedAndSaved:                  "Planned and saved",
		run.PostPlanCompleted:                "Post-plan completed",
		run.PlannedAndFinished:               "Planned and finished",
		run.PrePlanRunning:                   "Pre-plan running",
		run.ForceCanceled:                    "Force canceled",
		run.Applied:                          "Applied",
		stack.RunPreDeployingPendingOperator: "Planned, awaiting approval",
		stack.RunPreDeploying:                "Pre-deploying",
		stack.RunAcquiringLock:               "Acquiring lock",
		stack.StepPendingOperator:            "Awaiting approval",
		stack.RunSucceeded:                   "Succeeded",
	} {
		if got := statusLabel(in); got != want {
			t.Errorf("%v: %q, want %q", in, got, want)
		}
	}
}

// Every final status of a run, a deployment run and a step is styled as
// ended (ok or bad), never as busy or waiting.
func TestStatusClassOfFinalStatuses(t *testing.T) {
	var finals []any
	for _, s := range []run.Status{run.Pending, run.PrePlanRunning, run.PrePlanCompleted, run.PlanQueued, run.Planning, run.Planned,
		run.PostPlanRunning, run.PostPlanAwaitingDecision, run.PostPlanCompleted, run.PolicyChecking, run.PolicyChecked, run.PolicyOverride,
		run.PolicySoftFailed, run.PlannedAndFinished, run.PlannedAndSaved, run.Confirmed, run.PreApplyRunning, run.PreApplyCompleted,
		run.ApplyQueued, run.Applying, run.PostApplyRunning, run.PostApplyCompleted, run.Applied, run.Discarded, run.Errored, run.Canceled, run.ForceCanceled} {
		if s.Final() {
			finals = append(finals, s)
		}
	}
	for _, s := range []stack.RunStatus{stack.RunPending, stack.RunPreDeploying, stack.RunPreDeployingPendingOperator, stack.RunAcquiringLock,
		stack.RunDeploying, stack.RunDeployingPendingOperator, stack.RunSucceeded, stack.RunFailed, stack.RunAbandoned} {
		if s.Final() {
			finals = append(finals, s)
		}
	}
	for _, s := range []stack.StepStatus{stack.StepQueued, stack.StepRunning, stack.StepPendingOperator, stack.StepCompleted, stack.StepFailed, stack.StepAbandoned, stack.StepBlocked} {
		if s.Final() {
			finals = append(finals, s)
		}
	}
	finals = append(finals, stack.ConfigCompleted, stack.ConfigFailed)
	for _, s := range finals {
		if c := statusClass(s); c != "ok" && c != "bad" {
			t.Errorf("final status %v (%T) is styled %q", s, s, c)
		}
	}
	for s, want := range map[any]string{run.Applied: "ok", run.PlannedAndFinished: "ok", run.Errored: "bad", run.Discarded: "bad",
		run.PlannedAndSaved: "wait", run.Planned: "wait", run.Applying: "busy", stack.RunSucceeded: "ok", stack.StepCompleted: "ok",
		stack.StepPendingOperator: "wait", stack.RunPreDeployingPendingOperator: "wait", "completed": "ok", "planned_and_saved": "wait"} {
		if got := statusClass(s); got != want {
			t.Errorf("%v (%T): %q, want %q", s, s, got, want)
		}
	}
}
