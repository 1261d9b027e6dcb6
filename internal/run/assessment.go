package run

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Queue names the job queue a job waits in. Runs wait in QueueRuns, which
// the in-process runner and agents claim from; health assessments wait in
// QueueAssessments, claimed only by the assessment runner, so that they
// never take a slot of the run queue.
type Queue string

const (
	QueueRuns        Queue = "runs"
	QueueAssessments Queue = "assessments"
)

func queueOf(r *Run) Queue {
	if r.Assessment {
		return QueueAssessments
	}
	return QueueRuns
}

// SourceAssessment is the source of assessment runs.
const SourceAssessment = "terrace-assessment"

// AssessmentWake returns the channel on which the assessment runner is
// nudged when an assessment is queued.
func (s *Service) AssessmentWake() <-chan struct{} { return s.assessWake }

// CreateAssessment queues a health assessment of a workspace for the
// system (no caller): a refresh-only, plan-only run of the workspace's
// current configuration version with its current state, through the same
// runner code and engine choice as any run. It never holds the workspace,
// never applies and sends no run notifications (it is speculative).
// prepare is called inside the run's transaction (the assessment domain
// records its result row there).
func (s *Service) CreateAssessment(ctx context.Context, workspaceID string, prepare func(ctx context.Context, q store.Q, r *Run) error) (*Run, error) {
	ws, err := s.Workspaces.System(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if ws.ExecutionMode != "remote" {
		return nil, core.Conflict("workspace %q uses %s execution: assessments run on Terrace's own runners only", ws.Name, ws.ExecutionMode)
	}
	cv, err := s.Configs.Latest(ctx, ws.ID)
	if err != nil || cv.Status != "uploaded" {
		return nil, core.Conflict("workspace %q has no uploaded configuration version to assess", ws.Name)
	}
	now := core.Now()
	r := &Run{
		ID:                     core.NewID(core.PrefixRun),
		WorkspaceID:            ws.ID,
		Organization:           ws.Organization,
		ConfigurationVersionID: cv.ID,
		Status:                 Pending,
		Timestamps:             Stamps{},
		Message:                "Health assessment",
		Refresh:                true,
		RefreshOnly:            true,
		PlanOnly:               true,
		Assessment:             true,
		TerraformVersion:       ws.TerraformVersion,
		Source:                 SourceAssessment,
		TriggerReason:          "assessment",
		CreatedAt:              now,
		UpdatedAt:              now,
		Plan:                   Phase{ID: core.NewID(core.PrefixPlan), Status: PhasePending, Timestamps: Stamps{}},
		Apply:                  Phase{ID: core.NewID(core.PrefixApply), Status: PhasePending, Timestamps: Stamps{}},
	}
	r.Timestamps.set("plan-queueable-at", now)
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		if err := insertRun(ctx, tx, s.Keys, r); err != nil {
			return err
		}
		if err := addEvent(ctx, tx, r.ID, "created", "Health assessment created", ""); err != nil {
			return err
		}
		if prepare != nil {
			if err := prepare(ctx, tx, r); err != nil {
				return err
			}
		}
		return s.queuePhase(ctx, tx, r, PhasePlan)
	})
	if err != nil {
		return nil, err
	}
	select {
	case s.assessWake <- struct{}{}:
	default:
	}
	s.nudge() // long-polling claims of the assessment queue
	r.moves = append([]move{{"", Pending}}, r.moves...)
	s.changed(ctx, r)
	return s.get(ctx, r.ID)
}
