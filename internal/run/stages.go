package run

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// TaskStage names a point of the run where run tasks run.
type TaskStage string

// Task stages, in the order a run passes them.
const (
	StagePrePlan   TaskStage = "pre_plan"
	StagePostPlan  TaskStage = "post_plan"
	StagePreApply  TaskStage = "pre_apply"
	StagePostApply TaskStage = "post_apply"
)

// stageRunning is the run status while a task stage runs.
var stageRunning = map[TaskStage]Status{
	StagePrePlan: PrePlanRunning, StagePostPlan: PostPlanRunning, StagePreApply: PreApplyRunning, StagePostApply: PostApplyRunning,
}

// TaskStages is the run task domain as the run lifecycle sees it. Both
// calls happen inside the transaction that changes the run.
type TaskStages interface {
	// Prepare creates a new run's task stages (one per stage with tasks)
	// and returns the stages it created. Stages are made only here, so a
	// run's later checks skip the stages it did not get (Run.TaskStages).
	Prepare(ctx context.Context, q store.Q, r *Run) ([]TaskStage, error)
	// Start begins the run's task stage: true when the run has tasks at
	// that stage and must wait for them (Service.StageDone ends the wait).
	Start(ctx context.Context, q store.Q, r *Run, stage TaskStage) (bool, error)
	// Has reports whether the run has a task stage (runners keep the
	// saved plan of an auto-applied run that will wait at one).
	Has(ctx context.Context, runID string, stages ...TaskStage) (bool, error)
}

// StageOutcome is how a task stage ended for the run.
type StageOutcome string

// Stage outcomes.
const (
	// StagePassed: every task passed, or only advisory ones failed.
	StagePassed StageOutcome = "passed"
	// StageFailed: a mandatory task failed (or errored); the run errors.
	StageFailed StageOutcome = "failed"
	// StageAwaitingDecision: a mandatory post-plan task failed and a
	// user may override the stage; the run waits in
	// post_plan_awaiting_decision.
	StageAwaitingDecision StageOutcome = "awaiting_decision"
)

// startStage asks the run task domain whether the run waits at stage, and
// if so moves the run into the stage's running status.
func (s *Service) startStage(ctx context.Context, q store.Q, r *Run, stage TaskStage) (bool, error) {
	wait, err := s.stageStart(ctx, q, r, stage)
	if err != nil || !wait {
		return false, err
	}
	return true, r.transition(stageRunning[stage])
}

// stageStart asks the run task domain to start the run's task stage at
// stage (Stages.Start), unless the run is known to have none there: a run
// created with its stage set recorded (TaskStages) asks only about the
// stages it has, which saves a query per stage on the critical path of
// every run without run tasks.
func (s *Service) stageStart(ctx context.Context, q store.Q, r *Run, stage TaskStage) (bool, error) {
	if s.Stages == nil || !r.mayHaveStage(stage) {
		return false, nil
	}
	return s.Stages.Start(ctx, q, r, stage)
}

// enterPlan moves a pending run on: into its pre-plan task stage when it
// has one, else into the plan queue.
func (s *Service) enterPlan(ctx context.Context, q store.Q, r *Run) error {
	wait, err := s.startStage(ctx, q, r, StagePrePlan)
	if err != nil {
		return err
	}
	if wait {
		return updateRun(ctx, q, r)
	}
	return s.queuePhase(ctx, q, r, PhasePlan)
}

// enterApply moves a confirmed run on: into its pre-apply task stage when
// it has one, else into the apply queue.
func (s *Service) enterApply(ctx context.Context, q store.Q, r *Run) error {
	wait, err := s.startStage(ctx, q, r, StagePreApply)
	if err != nil {
		return err
	}
	if wait {
		return updateRun(ctx, q, r)
	}
	return s.queuePhase(ctx, q, r, PhaseApply)
}

// StageDone moves a run on once its task stage at stage has ended. A run
// that is no longer in that stage (canceled, or moved on by an earlier
// call) is left alone, so the call may be repeated.
func (s *Service) StageDone(ctx context.Context, runID string, stage TaskStage, outcome StageOutcome, msg string) error {
	_, err := s.update(ctx, runID, func(tx *store.Tx, r *Run) ([]*Run, error) {
		waiting := r.Status == stageRunning[stage] ||
			(stage == StagePostPlan && r.Status == PostPlanAwaitingDecision && outcome == StagePassed)
		if !waiting {
			return nil, nil
		}
		switch outcome {
		case StageFailed:
			if err := r.transition(Errored); err != nil {
				return nil, err
			}
			r.ErrorMessage = msg
			for _, p := range []*Phase{&r.Plan, &r.Apply} {
				if p.Status == PhasePending {
					p.setPhase(PhaseCanceled)
				}
			}
			if err := addEvent(ctx, tx, r.ID, "errored", msg, ""); err != nil {
				return nil, err
			}
			return s.release(ctx, tx, r)
		case StageAwaitingDecision:
			if stage != StagePostPlan {
				return nil, core.Invalid("only a post-plan task stage can wait for a decision")
			}
			return nil, r.transition(PostPlanAwaitingDecision)
		}
		switch stage {
		case StagePrePlan:
			if err := r.transition(PrePlanCompleted); err != nil {
				return nil, err
			}
			return nil, s.queuePhase(ctx, tx, r, PhasePlan)
		case StagePostPlan:
			if err := r.transition(PostPlanCompleted); err != nil {
				return nil, err
			}
			switch {
			case r.PlanOnly || (!r.HasChanges && !r.AllowEmptyApply):
				if err := r.transition(PlannedAndFinished); err != nil {
					return nil, err
				}
				return s.release(ctx, tx, r)
			case r.SavePlan:
				if err := r.transition(PlannedAndSaved); err != nil {
					return nil, err
				}
				return s.release(ctx, tx, r)
			case r.AutoApply && r.CancelRequestedAt.IsZero():
				if err := r.transition(Confirmed); err != nil {
					return nil, err
				}
				return nil, s.enterApply(ctx, tx, r)
			}
			return nil, nil // rests at post_plan_completed, confirmable
		case StagePreApply:
			if err := r.transition(PreApplyCompleted); err != nil {
				return nil, err
			}
			return nil, s.queuePhase(ctx, tx, r, PhaseApply)
		case StagePostApply:
			if err := r.transition(PostApplyCompleted); err != nil {
				return nil, err
			}
			if err := r.transition(Applied); err != nil {
				return nil, err
			}
			return s.release(ctx, tx, r)
		}
		return nil, core.Invalid("unknown task stage %q", stage)
	})
	return err
}

// WaitsAtStage reports whether a run waits for its task stage at stage
// (the run task domain finishes stages whose end it may have missed).
func (s *Service) WaitsAtStage(ctx context.Context, runID string, stage TaskStage) (bool, error) {
	r, err := s.get(ctx, runID)
	if err != nil {
		return false, err
	}
	return r.Status == stageRunning[stage], nil
}
