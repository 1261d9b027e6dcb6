package runtask

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// ID prefixes of stages and results.
const (
	PrefixStage  = "ts"
	PrefixResult = "taskrs"
)

// StageStatus is a task stage's place in its lifecycle; stageMoves is the
// whole state machine (docs/design/runtasks.md draws it).
type StageStatus string

// Stage statuses, as HCP Terraform spells them.
const (
	StagePending          StageStatus = "pending"           // the run has not reached the stage
	StageRunning          StageStatus = "running"           // requests sent, results awaited
	StagePassed           StageStatus = "passed"            // every mandatory task passed (final)
	StageFailed           StageStatus = "failed"            // a mandatory task did not pass (final)
	StageAwaitingOverride StageStatus = "awaiting_override" // a mandatory post-plan task did not pass; a user decides
	StageCanceled         StageStatus = "canceled"          // the run ended first (final)
)

var stageMoves = map[StageStatus][]StageStatus{
	StagePending:          {StageRunning, StageCanceled},
	StageRunning:          {StagePassed, StageFailed, StageAwaitingOverride, StageCanceled},
	StageAwaitingOverride: {StagePassed, StageCanceled},
}

// ResultStatus is a task result's place in its lifecycle; resultMoves is
// the whole state machine.
type ResultStatus string

// Result statuses, as HCP Terraform spells them.
const (
	ResultPending  ResultStatus = "pending"  // stage not started, or the request not yet accepted
	ResultRunning  ResultStatus = "running"  // the service accepted the request or reported progress
	ResultPassed   ResultStatus = "passed"   // final
	ResultFailed   ResultStatus = "failed"   // final
	ResultErrored  ResultStatus = "errored"  // no answer, or no result in time (final)
	ResultCanceled ResultStatus = "canceled" // the run ended first (final)
)

var resultMoves = map[ResultStatus][]ResultStatus{
	ResultPending: {ResultRunning, ResultPassed, ResultFailed, ResultErrored, ResultCanceled},
	ResultRunning: {ResultRunning, ResultPassed, ResultFailed, ResultErrored, ResultCanceled},
}

func toRunStage(s Stage) run.TaskStage { return run.TaskStage(s) }

// Final reports whether a result will not change any more.
func (s ResultStatus) Final() bool { _, ok := resultMoves[s]; return !ok }

// TaskStageRecord is one stage of one run.
type TaskStageRecord struct {
	ID           string
	RunID        string
	Organization string
	WorkspaceID  string
	Stage        Stage
	Status       StageStatus
	Timestamps   map[string]time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// Outcome is a detailed result a task service reports (task-result-outcomes).
type Outcome struct {
	OutcomeID   string           `json:"outcome-id"`
	Description string           `json:"description"`
	Body        string           `json:"body,omitempty"`
	URL         string           `json:"url,omitempty"`
	Tags        map[string][]Tag `json:"tags,omitempty"`
}

// Tag is an outcome's label; Level is none, info, warning or error.
type Tag struct {
	Label string `json:"label"`
	Level string `json:"level,omitempty"`
}

// Result is one task's result in one stage.
type Result struct {
	ID              string
	StageID         string
	RunID           string
	TaskID          string
	TaskName        string
	TaskURL         string
	WorkspaceTaskID string
	Enforcement     Enforcement
	Status          ResultStatus
	Message         string
	URL             string
	Outcomes        []Outcome
	Timestamps      map[string]time.Time
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

const stageCols = `id, run_id, organization_name, workspace_id, stage, status, status_timestamps, created_at, updated_at`

func scanStage(sc store.Scanner) (*TaskStageRecord, error) {
	var st TaskStageRecord
	var stamps string
	var created, updated int64
	if err := sc.Scan(&st.ID, &st.RunID, &st.Organization, &st.WorkspaceID, &st.Stage, &st.Status, &stamps, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stamps), &st.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding task stage %s: %w", st.ID, err)
	}
	st.CreatedAt, st.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &st, nil
}

const resultCols = `id, stage_id, run_id, task_id, task_name, task_url, workspace_task_id, enforcement_level, status, message, url, outcomes, status_timestamps, created_at, updated_at`

func scanResult(sc store.Scanner) (*Result, error) {
	var r Result
	var outcomes, stamps string
	var created, updated int64
	if err := sc.Scan(&r.ID, &r.StageID, &r.RunID, &r.TaskID, &r.TaskName, &r.TaskURL, &r.WorkspaceTaskID, &r.Enforcement, &r.Status,
		&r.Message, &r.URL, &outcomes, &stamps, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(outcomes), &r.Outcomes); err != nil {
		return nil, fmt.Errorf("decoding task result %s: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(stamps), &r.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding task result %s: %w", r.ID, err)
	}
	r.CreatedAt, r.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &r, nil
}

// moveStage changes a stage's status if the table allows it and the row
// is still at from; it reports whether the row moved.
func moveStage(ctx context.Context, q store.Q, st *TaskStageRecord, to StageStatus) (bool, error) {
	if !slices.Contains(stageMoves[st.Status], to) {
		return false, fmt.Errorf("a task stage cannot go from %s to %s", st.Status, to)
	}
	now := core.Now()
	st.Timestamps[string(to)+"-at"] = now
	res, err := q.Exec(ctx, `UPDATE task_stages SET status = ?, status_timestamps = ?, updated_at = ? WHERE id = ? AND status = ?`,
		string(to), jsonText(st.Timestamps), core.Micros(now), st.ID, string(st.Status))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if n == 1 {
		st.Status, st.UpdatedAt = to, now
	}
	return n == 1, err
}

// moveResult changes a result's status if the table allows it and the row
// is still at from; set adds assignments (with args) to the update.
func moveResult(ctx context.Context, q store.Q, r *Result, to ResultStatus, set string, args ...any) (bool, error) {
	if !slices.Contains(resultMoves[r.Status], to) {
		return false, core.Invalid("a task result cannot go from %s to %s", r.Status, to)
	}
	now := core.Now()
	r.Timestamps[string(to)+"-at"] = now
	query := `UPDATE task_results SET status = ?, status_timestamps = ?, updated_at = ?`
	if to.Final() {
		query += `, deadline = 0, progress_deadline = 0`
	}
	if set != "" {
		query += ", " + set
	}
	query += ` WHERE id = ? AND status = ?`
	all := append([]any{string(to), jsonText(r.Timestamps), core.Micros(now)}, args...)
	all = append(all, r.ID, string(r.Status))
	res, err := q.Exec(ctx, query, all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if n == 1 {
		r.Status, r.UpdatedAt = to, now
	}
	return n == 1, err
}

// taskFor is one task a run gets at one stage.
type taskFor struct {
	task        *Task
	wsTaskID    string
	enforcement Enforcement
	stages      []Stage
}

// tasksOf returns the enabled tasks of a workspace: its attachments, then
// the organization's global tasks it has no attachment of.
func (s *Service) tasksOf(ctx context.Context, q store.Q, org, workspaceID string) ([]taskFor, error) {
	tasks, err := store.All(ctx, q, taskScanner(s.o.Keys), `SELECT `+taskCols+` FROM run_tasks WHERE organization_name = ? ORDER BY created_at, id`, org)
	if err != nil || len(tasks) == 0 {
		// No task in the organization: no attachment can name one (the
		// attachments are not read, a query fewer for every new run).
		return nil, err
	}
	attached, err := store.All(ctx, q, scanWorkspaceTask, `SELECT `+wsTaskCols+` FROM workspace_run_tasks WHERE workspace_id = ? ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Task{}
	for _, t := range tasks {
		byID[t.ID] = t
	}
	var out []taskFor
	seen := map[string]bool{}
	for _, w := range attached {
		t := byID[w.TaskID]
		seen[w.TaskID] = true
		if t == nil || !t.Enabled {
			continue
		}
		out = append(out, taskFor{task: t, wsTaskID: w.ID, enforcement: w.EnforcementLevel, stages: w.Stages})
	}
	for _, t := range tasks {
		if !seen[t.ID] && t.Enabled && t.Global.Enabled {
			out = append(out, taskFor{task: t, enforcement: t.Global.EnforcementLevel, stages: t.Global.Stages})
		}
	}
	return out, nil
}

// Prepare creates a new run's task stages, one per stage with tasks, each
// with a pending result per task (a run.TaskStages call, inside the
// transaction that creates the run), and returns the stages it created.
func (s *Service) Prepare(ctx context.Context, q store.Q, r *run.Run) ([]run.TaskStage, error) {
	tasks, err := s.tasksOf(ctx, q, r.Organization, r.WorkspaceID)
	if err != nil {
		return nil, err
	}
	policies := false
	if s.o.Policies != nil {
		project, _ := r.WorkspaceProject() // known to a run just created: no read of the workspace
		if policies, err = s.o.Policies.Applies(ctx, q, r.Organization, r.WorkspaceID, project); err != nil {
			return nil, err
		}
	}
	var made []run.TaskStage
	now := core.Now()
	for _, stage := range Stages {
		var at []taskFor
		for _, t := range tasks {
			if slices.Contains(t.stages, stage) {
				at = append(at, t)
			}
		}
		withPolicies := policies && stage == PostPlan
		if len(at) == 0 && !withPolicies {
			continue
		}
		made = append(made, toRunStage(stage))
		stageID := core.NewID(PrefixStage)
		if _, err := q.Exec(ctx, `INSERT INTO task_stages (`+stageCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			stageID, r.ID, r.Organization, r.WorkspaceID, string(stage), string(StagePending), jsonText(map[string]time.Time{}),
			core.Micros(now), core.Micros(now)); err != nil {
			return nil, err
		}
		if withPolicies {
			if err := s.o.Policies.Prepare(ctx, q, stageID, r.ID, r.Organization, r.WorkspaceID); err != nil {
				return nil, err
			}
		}
		for _, t := range at {
			if _, err := q.Exec(ctx, `INSERT INTO task_results (id, stage_id, run_id, task_id, task_name, task_url, workspace_task_id, enforcement_level, status, outcomes, status_timestamps, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				core.NewID(PrefixResult), stageID, r.ID, t.task.ID, t.task.Name, t.task.URL, t.wsTaskID, string(t.enforcement),
				string(ResultPending), "[]", jsonText(map[string]time.Time{}), core.Micros(now), core.Micros(now)); err != nil {
				return nil, err
			}
		}
	}
	return made, nil
}

// Start begins a run's stage: the stage runs and its requests become due.
// False when the run has no tasks at that stage.
func (s *Service) Start(ctx context.Context, q store.Q, r *run.Run, stage run.TaskStage) (bool, error) {
	st, err := scanStage(q.QueryRow(ctx, `SELECT `+stageCols+` FROM task_stages WHERE run_id = ? AND stage = ?`, r.ID, string(stage)))
	if store.IsNoRows(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if st.Status != StagePending {
		return false, nil
	}
	if ok, err := moveStage(ctx, q, st, StageRunning); err != nil || !ok {
		return false, err
	}
	now := core.Now()
	if _, err := q.Exec(ctx, `UPDATE task_results SET deadline = ?, updated_at = ? WHERE stage_id = ? AND status = ?`,
		core.Micros(now.Add(s.o.TotalTimeout)), core.Micros(now), st.ID, string(ResultPending)); err != nil {
		return false, err
	}
	ids, err := store.All(ctx, q, func(sc store.Scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	}, `SELECT id FROM task_results WHERE stage_id = ? AND status = ? ORDER BY created_at, id`, st.ID, string(ResultPending))
	if err != nil {
		return false, err
	}
	for _, id := range ids {
		if _, err := s.requests.Enqueue(ctx, q, outbox.Message{Key: id}); err != nil {
			return false, err
		}
	}
	// The delivery loop is nudged once the run's transaction committed
	// (RunTransition): before that it would not see the queued requests.
	return true, nil
}

// Has reports whether a run has a task stage at one of stages.
// One query, whatever the number of stages asked about.
func (s *Service) Has(ctx context.Context, runID string, stages ...run.TaskStage) (bool, error) {
	if len(stages) == 0 {
		return false, nil
	}
	args := []any{runID}
	for _, st := range stages {
		args = append(args, string(st))
	}
	var n int
	err := s.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM task_stages WHERE run_id = ? AND stage IN (?`+strings.Repeat(", ?", len(stages)-1)+`)`, args...).Scan(&n)
	return n > 0, err
}

// evaluate ends a running stage once every result is final, then moves
// the run on. Advisory failures only warn; a mandatory result that did not
// pass fails the stage, or (post-plan) makes it wait for an override.
func (s *Service) evaluate(ctx context.Context, stageID string) error {
	if s.o.Policies != nil {
		// Outside the transaction: it reads the plan and runs OPA, then
		// records the outcome in its own transaction.
		if err := s.o.Policies.Evaluate(ctx, stageID); err != nil {
			s.o.Logger.Error("evaluating the policies of a task stage", "stage", stageID, "error", err)
		}
	}
	var st *TaskStageRecord
	var msg string
	err := s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var err error
		st, err = scanStage(tx.QueryRow(ctx, `SELECT `+stageCols+` FROM task_stages WHERE id = ?`+store.ForUpdate(tx), stageID))
		if err != nil {
			return err
		}
		if st.Status != StageRunning {
			return nil
		}
		results, err := store.All(ctx, tx, scanResult, `SELECT `+resultCols+` FROM task_results WHERE stage_id = ?`, stageID)
		if err != nil {
			return err
		}
		var blocking []string
		for _, r := range results {
			if !r.Status.Final() {
				return nil
			}
			if r.Status != ResultPassed && r.Enforcement == Mandatory {
				blocking = append(blocking, fmt.Sprintf("%s %s", r.TaskName, r.Status))
			}
		}
		verdict, err := s.policyVerdict(ctx, tx, stageID)
		if err != nil || !verdict.Done {
			return err
		}
		blocking = append(blocking, verdict.Blocking...)
		to := StagePassed
		if len(blocking) > 0 {
			msg = fmt.Sprintf("Mandatory run tasks or policies at %s did not pass: %s", st.Stage, strings.Join(blocking, ", "))
			to = StageFailed
			if st.Stage == PostPlan && verdict.Overridable {
				to = StageAwaitingOverride
			}
		}
		if _, err := moveStage(ctx, tx, st, to); err != nil {
			return err
		}
		return s.revoke(ctx, tx, results)
	})
	if err != nil {
		return err
	}
	return s.moveRun(ctx, st, msg)
}

// moveRun tells the run where its ended stage leaves it.
func (s *Service) moveRun(ctx context.Context, st *TaskStageRecord, msg string) error {
	var outcome run.StageOutcome
	switch st.Status {
	case StagePassed:
		outcome = run.StagePassed
	case StageFailed:
		outcome = run.StageFailed
	case StageAwaitingOverride:
		outcome = run.StageAwaitingDecision
	default:
		return nil
	}
	return s.o.Runs.StageDone(ctx, st.RunID, toRunStage(st.Stage), outcome, msg)
}

// revoke deletes the access tokens of results: they die with the stage.
func (s *Service) revoke(ctx context.Context, q store.Q, results []*Result) error {
	for _, r := range results {
		if err := s.o.Tokens.DeleteTokens(ctx, q, auth.KindTaskResult, r.ID); err != nil {
			return err
		}
	}
	return nil
}

// RunTransition wakes the delivery loop when a run entered a task stage,
// and cancels the stages a run will not reach (or was in) when it ends. It
// is a run.Service observer, called after the transaction committed.
func (s *Service) RunTransition(ctx context.Context, t run.Transition) {
	switch t.To {
	case run.PrePlanRunning, run.PostPlanRunning, run.PreApplyRunning, run.PostApplyRunning:
		s.nudge()
		return
	}
	if !t.To.Final() {
		return
	}
	if t.Run.TaskStagesKnown && len(t.Run.TaskStages) == 0 {
		return // the run got no task stage: nothing to cancel
	}
	if err := s.cancelStages(ctx, t.Run.ID); err != nil {
		s.o.Logger.Error("canceling the task stages of an ended run", "run", t.Run.ID, "error", err)
	}
}

func (s *Service) cancelStages(ctx context.Context, runID string) error {
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		stages, err := store.All(ctx, tx, scanStage, `SELECT `+stageCols+` FROM task_stages WHERE run_id = ? AND status IN (?, ?, ?)`,
			runID, string(StagePending), string(StageRunning), string(StageAwaitingOverride))
		if err != nil {
			return err
		}
		for _, st := range stages {
			if _, err := moveStage(ctx, tx, st, StageCanceled); err != nil {
				return err
			}
			if s.o.Policies != nil {
				if err := s.o.Policies.Ended(ctx, tx, st.ID, false); err != nil {
					return err
				}
			}
			results, err := store.All(ctx, tx, scanResult, `SELECT `+resultCols+` FROM task_results WHERE stage_id = ?`, st.ID)
			if err != nil {
				return err
			}
			for _, r := range results {
				if !r.Status.Final() {
					if _, err := moveResult(ctx, tx, r, ResultCanceled, ""); err != nil {
						return err
					}
				}
			}
			if err := s.revoke(ctx, tx, results); err != nil {
				return err
			}
		}
		return nil
	})
}

// TaskResultScope tells the auth service what a task result's access
// token reaches (auth.TaskResultResolver). Only a result whose stage
// runs has a living token.
func (s *Service) TaskResultScope(ctx context.Context, resultID string) (auth.TaskResultScope, error) {
	var sc auth.TaskResultScope
	var stageStatus string
	err := s.o.DB.QueryRow(ctx, `SELECT s.run_id, s.workspace_id, s.organization_name, s.status FROM task_results r JOIN task_stages s ON s.id = r.stage_id WHERE r.id = ?`, resultID).
		Scan(&sc.RunID, &sc.WorkspaceID, &sc.Organization, &stageStatus)
	if err != nil {
		return sc, core.NotFound("task result %q not found", resultID)
	}
	if StageStatus(stageStatus) != StageRunning {
		return sc, core.NotFound("the stage of task result %q has ended", resultID)
	}
	info, err := s.o.Runs.RunInfo(ctx, sc.RunID)
	if err != nil {
		return sc, err
	}
	sc.ConfigVersionID = info.ConfigVersionID
	return sc, nil
}
