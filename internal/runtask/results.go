package runtask

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// readableStage checks that the caller may read the stage's run.
func readableStage(ctx context.Context, st *TaskStageRecord) error {
	err := authz.Allows(ctx, authz.RunRead, authz.Resource{Organization: st.Organization, WorkspaceID: st.WorkspaceID, RunID: st.RunID})
	return core.NotFoundAs(err, "task stage %q not found", st.ID)
}

func (s *Service) loadStage(ctx context.Context, id string) (*TaskStageRecord, error) {
	if !core.HasPrefix(id, PrefixStage) {
		return nil, core.NotFound("task stage %q not found", id)
	}
	st, err := scanStage(s.o.DB.QueryRow(ctx, `SELECT `+stageCols+` FROM task_stages WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("task stage %q not found", id)
	}
	return st, err
}

// Stage returns a task stage the caller may read, with its results.
func (s *Service) Stage(ctx context.Context, id string) (*TaskStageRecord, []*Result, error) {
	st, err := s.loadStage(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	if err := readableStage(ctx, st); err != nil {
		return nil, nil, err
	}
	results, err := store.All(ctx, s.o.DB, scanResult, `SELECT `+resultCols+` FROM task_results WHERE stage_id = ? ORDER BY created_at, id`, st.ID)
	return st, results, err
}

// StagesOfRun returns a run's task stages, in stage order (the caller
// already read the run).
func (s *Service) StagesOfRun(ctx context.Context, runID string) ([]*TaskStageRecord, map[string][]*Result, error) {
	stages, err := store.All(ctx, s.o.DB, scanStage, `SELECT `+stageCols+` FROM task_stages WHERE run_id = ?`, runID)
	if err != nil {
		return nil, nil, err
	}
	order := map[Stage]int{PrePlan: 0, PostPlan: 1, PreApply: 2, PostApply: 3}
	for i := 1; i < len(stages); i++ {
		for j := i; j > 0 && order[stages[j].Stage] < order[stages[j-1].Stage]; j-- {
			stages[j], stages[j-1] = stages[j-1], stages[j]
		}
	}
	results, err := store.All(ctx, s.o.DB, scanResult, `SELECT `+resultCols+` FROM task_results WHERE run_id = ? ORDER BY created_at, id`, runID)
	if err != nil {
		return nil, nil, err
	}
	byStage := map[string][]*Result{}
	for _, r := range results {
		byStage[r.StageID] = append(byStage[r.StageID], r)
	}
	return stages, byStage, nil
}

// StageIDsOfRun returns the IDs of a run's task stages, in stage order
// (the caller already read the run). A list of runs has them remembered
// in the request memo by PrefetchStageIDs.
func (s *Service) StageIDsOfRun(ctx context.Context, runID string) ([]string, error) {
	return core.Memoize(ctx, stageIDsKey+runID, func() ([]string, error) {
		byRun, err := s.stageIDs(ctx, []string{runID})
		return byRun[runID], err
	})
}

const stageIDsKey = "task-stage-ids:"

// RunStageIDsSQL says StageIDsOfRun in SQL for the run domain's one-statement
// run read (run.StageIDsSQL): a scalar subquery over runs.id giving the
// stage IDs comma-separated in stage order (NULL for none).
func (s *Service) RunStageIDsSQL() string { return runStageIDsSQL() }

// runStageIDsSQL is written once: every run read asks for it.
var runStageIDsSQL = sync.OnceValue(func() string {
	order := "CASE ts.stage"
	for i, st := range Stages {
		order += fmt.Sprintf(" WHEN '%s' THEN %d", st, i)
	}
	order += " END"
	return `SELECT string_agg(ts.id, ',' ORDER BY ` + order + `, ts.id) FROM task_stages ts WHERE ts.run_id = runs.id`
})

// RememberStageIDs keeps a run's stage IDs, read with the run, in the
// request memo, where StageIDsOfRun finds them.
func (s *Service) RememberStageIDs(ctx context.Context, runID string, ids []string) {
	core.Remember(ctx, stageIDsKey+runID, ids)
}

// PrefetchStageIDs reads the task stage IDs of a page of runs in one
// query and remembers each run's in the request memo.
func (s *Service) PrefetchStageIDs(ctx context.Context, runIDs []string) error {
	if len(runIDs) == 0 {
		return nil
	}
	byRun, err := s.stageIDs(ctx, runIDs)
	if err != nil {
		return err
	}
	for _, id := range runIDs {
		core.Remember(ctx, stageIDsKey+id, byRun[id])
	}
	return nil
}

// stageIDs returns the task stage IDs of each run, in stage order (an
// empty list for a run without stages).
func (s *Service) stageIDs(ctx context.Context, runIDs []string) (map[string][]string, error) {
	type row struct {
		id, run string
		stage   Stage
	}
	args := make([]any, len(runIDs))
	for i, id := range runIDs {
		args[i] = id
	}
	rows, err := store.All(ctx, s.o.DB, func(sc store.Scanner) (row, error) {
		var r row
		return r, sc.Scan(&r.id, &r.run, &r.stage)
	}, `SELECT id, run_id, stage FROM task_stages WHERE run_id IN (?`+strings.Repeat(",?", len(runIDs)-1)+`)`, args...)
	if err != nil {
		return nil, err
	}
	byRun := make(map[string][]string, len(runIDs))
	for _, id := range runIDs {
		byRun[id] = []string{}
	}
	for _, st := range Stages {
		for _, r := range rows {
			if r.stage == st {
				byRun[r.run] = append(byRun[r.run], r.id)
			}
		}
	}
	return byRun, nil
}

// Result returns a task result the caller may read.
func (s *Service) Result(ctx context.Context, id string) (*Result, *TaskStageRecord, error) {
	r, err := s.loadResult(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	st, err := s.loadStage(ctx, r.StageID)
	if err != nil {
		return nil, nil, err
	}
	if err := readableStage(ctx, st); err != nil {
		return nil, nil, core.NotFound("task result %q not found", id)
	}
	return r, st, nil
}

func (s *Service) loadResult(ctx context.Context, id string) (*Result, error) {
	if !core.HasPrefix(id, PrefixResult) {
		return nil, core.NotFound("task result %q not found", id)
	}
	r, err := scanResult(s.o.DB.QueryRow(ctx, `SELECT `+resultCols+` FROM task_results WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("task result %q not found", id)
	}
	return r, err
}

// Report is a task service's callback.
type Report struct {
	Status   ResultStatus
	Message  string
	URL      string
	Outcomes []Outcome
}

// maxOutcomeBody is HCP Terraform's limit on an outcome's body.
const maxOutcomeBody = 5 << 20

// Validate checks what a report may say: a callback status, outcome
// bodies within HCP Terraform's limit, tag levels it knows.
func (rep Report) Validate() error {
	switch rep.Status {
	case ResultRunning, ResultPassed, ResultFailed:
	default:
		return core.Invalid("status must be running, passed or failed, not %q", rep.Status)
	}
	for _, o := range rep.Outcomes {
		if len(o.Body) > maxOutcomeBody {
			return core.Invalid("outcome %q has a body over 5MB", o.OutcomeID)
		}
		for name, tags := range o.Tags {
			for _, t := range tags {
				switch t.Level {
				case "", "none", "info", "warning", "error":
				default:
					return core.Invalid("tag %q of outcome %q has level %q, not none, info, warning or error", name, o.OutcomeID, t.Level)
				}
			}
		}
	}
	return nil
}

// Callback records what a task service reports. Only the result's own
// access token may report; running may come many times, passed and failed
// once.
func (s *Service) Callback(ctx context.Context, id string, rep Report) error {
	p := auth.FromContext(ctx)
	if p == nil || p.Kind != auth.KindTaskResult {
		return core.Unauthorized("a task result callback needs the access token the run task request carried")
	}
	if p.TaskResultID != id {
		return core.NotFound("task result %q not found", id)
	}
	if err := rep.Validate(); err != nil {
		return err
	}
	set, args := "message = ?, url = ?", []any{rep.Message, rep.URL}
	if rep.Outcomes != nil {
		set += ", outcomes = ?"
		args = append(args, jsonText(rep.Outcomes))
	}
	if rep.Status == ResultRunning {
		set += ", progress_deadline = ?"
		args = append(args, core.Micros(core.Now().Add(s.o.ProgressTimeout)))
	}
	// The move is made on the status read; the server's own bookkeeping
	// may move the result meanwhile (the delivery records the request as
	// accepted, pending to running, after the service answered it, and a
	// service may call back before that), so a lost race reads the result
	// again and moves it from where it is now. Only a result that became
	// final refuses the report. The status only moves forward (pending,
	// running, final), so a third read finds it final at the latest
	// (TestCallbackRace).
	var stageID string
	for attempt := 1; ; attempt++ {
		r, err := s.loadResult(ctx, id)
		if err != nil {
			return err
		}
		if r.Status.Final() {
			return core.Invalid("task result %s is already %s", id, r.Status)
		}
		if s.beforeMove != nil {
			s.beforeMove(attempt)
		}
		ok, err := moveResult(ctx, s.o.DB, r, rep.Status, set, args...)
		if err != nil {
			return err
		}
		if ok {
			stageID = r.StageID
			break
		}
		if attempt == 3 {
			return core.Conflict("task result %s changed meanwhile; report again", id)
		}
	}
	if rep.Status.Final() {
		return s.evaluate(ctx, stageID)
	}
	return nil
}

// Override lets a run go on past a post-plan stage waiting for a
// decision; it asks the model for the workspace's policy-overrides
// permission.
func (s *Service) Override(ctx context.Context, id, comment string) (*TaskStageRecord, error) {
	st, err := s.loadStage(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := readableStage(ctx, st); err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.RunOverrideTasks, authz.Resource{Organization: st.Organization, WorkspaceID: st.WorkspaceID, RunID: st.RunID}); err != nil {
		return nil, err
	}
	if st.Status != StageAwaitingOverride {
		return nil, core.Conflict("task stage %s is %s: only a stage awaiting an override can be overridden", id, st.Status)
	}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		if ok, err := moveStage(ctx, tx, st, StagePassed); err != nil {
			return err
		} else if !ok {
			return core.Conflict("task stage %s changed meanwhile", id)
		}
		if s.o.Policies != nil {
			return s.o.Policies.Ended(ctx, tx, st.ID, true)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	msg := "Overridden"
	if comment != "" {
		msg = fmt.Sprintf("Overridden: %s", comment)
	}
	if err := s.moveRun(ctx, st, msg); err != nil {
		return nil, err
	}
	return st, nil
}
