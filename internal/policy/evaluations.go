package policy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/store"
)

// EvalStatus is a policy evaluation's place in its lifecycle; evalMoves
// is the whole state machine (docs/design/policies.md draws it).
type EvalStatus string

// Evaluation statuses, as HCP Terraform spells them.
const (
	EvalPending    EvalStatus = "pending"    // the run has not reached its post-plan stage
	EvalRunning    EvalStatus = "running"    // claimed by a server that evaluates it
	EvalPassed     EvalStatus = "passed"     // nothing mandatory failed (advisory failures warn); final
	EvalFailed     EvalStatus = "failed"     // a mandatory policy failed or a set errored
	EvalOverridden EvalStatus = "overridden" // failed, then a user overrode the stage; final
	EvalCanceled   EvalStatus = "canceled"   // the run ended first; final
)

var evalMoves = map[EvalStatus][]EvalStatus{
	EvalPending: {EvalRunning, EvalCanceled},
	EvalRunning: {EvalRunning, EvalPassed, EvalFailed, EvalCanceled},
	EvalFailed:  {EvalOverridden},
}

func (s EvalStatus) final() bool { return s != EvalPending && s != EvalRunning }

// claimFor is how long a server owns a running evaluation; after that
// (a crash) another takes it over.
const claimFor = 2 * time.Minute

// ResultCount counts the outcomes of an evaluation or a set.
type ResultCount struct {
	AdvisoryFailed  int `json:"advisory-failed"`
	MandatoryFailed int `json:"mandatory-failed"`
	Passed          int `json:"passed"`
	Errored         int `json:"errored"`
}

func (c *ResultCount) add(o ResultCount) {
	c.AdvisoryFailed += o.AdvisoryFailed
	c.MandatoryFailed += o.MandatoryFailed
	c.Passed += o.Passed
	c.Errored += o.Errored
}

// Evaluation is the policy evaluation of one task stage and kind.
type Evaluation struct {
	ID           string
	StageID      string
	RunID        string
	Organization string
	WorkspaceID  string
	Kind         Kind
	Status       EvalStatus
	Timestamps   map[string]time.Time
	Count        ResultCount
	ClaimedUntil int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// SetOutcome is one policy set's result in an evaluation.
type SetOutcome struct {
	ID             string
	EvaluationID   string
	SetID          string
	SetName        string
	SetDescription string
	Overridable    bool
	Kind           Kind
	Error          string
	Outcomes       []Outcome
	Count          ResultCount
	CreatedAt      time.Time
}

const evalCols = `id, task_stage_id, run_id, organization_name, workspace_id, kind, status, status_timestamps, result_count, claimed_until, created_at, updated_at`

func scanEval(sc store.Scanner) (*Evaluation, error) {
	var e Evaluation
	var stamps, count string
	var created, updated int64
	if err := sc.Scan(&e.ID, &e.StageID, &e.RunID, &e.Organization, &e.WorkspaceID, &e.Kind, &e.Status, &stamps, &count,
		&e.ClaimedUntil, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stamps), &e.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding policy evaluation %s: %w", e.ID, err)
	}
	if err := json.Unmarshal([]byte(count), &e.Count); err != nil {
		return nil, fmt.Errorf("decoding policy evaluation %s: %w", e.ID, err)
	}
	e.CreatedAt, e.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &e, nil
}

const outcomeCols = `o.id, o.policy_evaluation_id, o.policy_set_id, o.policy_set_name, o.policy_set_description, o.overridable, e.kind, o.error, o.outcomes, o.result_count, o.created_at`

func scanOutcome(sc store.Scanner) (*SetOutcome, error) {
	var o SetOutcome
	var outcomes, count string
	var created int64
	if err := sc.Scan(&o.ID, &o.EvaluationID, &o.SetID, &o.SetName, &o.SetDescription, &o.Overridable, &o.Kind, &o.Error, &outcomes, &count, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(outcomes), &o.Outcomes); err != nil {
		return nil, fmt.Errorf("decoding policy set outcome %s: %w", o.ID, err)
	}
	if err := json.Unmarshal([]byte(count), &o.Count); err != nil {
		return nil, fmt.Errorf("decoding policy set outcome %s: %w", o.ID, err)
	}
	o.CreatedAt = core.FromMicros(created)
	return &o, nil
}

// moveEval changes an evaluation's status if the table allows it and the
// row is still as read; set adds assignments (with args).
func moveEval(ctx context.Context, q store.Q, e *Evaluation, to EvalStatus, set string, args ...any) (bool, error) {
	ok := false
	for _, s := range evalMoves[e.Status] {
		ok = ok || s == to
	}
	if !ok {
		return false, fmt.Errorf("a policy evaluation cannot go from %s to %s", e.Status, to)
	}
	now := core.Now()
	e.Timestamps[string(to)+"-at"] = now
	query := `UPDATE policy_evaluations SET status = ?, status_timestamps = ?, updated_at = ?`
	if set != "" {
		query += ", " + set
	}
	query += ` WHERE id = ? AND status = ? AND claimed_until = ?`
	all := append([]any{string(to), jsonText(e.Timestamps), core.Micros(now)}, args...)
	all = append(all, e.ID, string(e.Status), e.ClaimedUntil)
	res, err := q.Exec(ctx, query, all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if n == 1 {
		e.Status, e.UpdatedAt = to, now
	}
	return n == 1, err
}

// stageSets returns the sets that apply to a workspace, by kind.
func (s *Service) stageSets(ctx context.Context, q store.Q, org, workspaceID, projectID string) (map[Kind][]*Set, error) {
	if projectID == "" {
		var err error
		if projectID, err = s.o.Workspaces.ProjectOf(ctx, q, workspaceID); err != nil {
			return nil, err
		}
	}
	sets, err := s.setsFor(ctx, q, org, workspaceID, projectID)
	if err != nil {
		return nil, err
	}
	out := map[Kind][]*Set{}
	for _, set := range sets {
		out[set.Kind] = append(out[set.Kind], set)
	}
	return out, nil
}

// Applies implements runtask.PolicyChecks.
func (s *Service) Applies(ctx context.Context, q store.Q, org, workspaceID, projectID string) (bool, error) {
	sets, err := s.stageSets(ctx, q, org, workspaceID, projectID)
	return len(sets) > 0, err
}

// Prepare implements runtask.PolicyChecks: one pending evaluation per
// kind of the sets that apply.
func (s *Service) Prepare(ctx context.Context, q store.Q, stageID, runID, org, workspaceID string) error {
	sets, err := s.stageSets(ctx, q, org, workspaceID, "")
	if err != nil {
		return err
	}
	now := core.Micros(core.Now())
	for _, kind := range []Kind{OPA, Sentinel} {
		if len(sets[kind]) == 0 {
			continue
		}
		if _, err := q.Exec(ctx, `INSERT INTO policy_evaluations (`+evalCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			core.NewID(PrefixEvaluation), stageID, runID, org, workspaceID, string(kind), string(EvalPending), "{}", jsonText(ResultCount{}),
			0, now, now); err != nil {
			return err
		}
	}
	return nil
}

// Evaluate implements runtask.PolicyChecks: it claims each pending
// evaluation of the stage (or one whose claimant vanished), evaluates it
// and records the outcome.
func (s *Service) Evaluate(ctx context.Context, stageID string) error {
	evals, err := store.All(ctx, s.o.DB, scanEval, `SELECT `+evalCols+` FROM policy_evaluations WHERE task_stage_id = ? AND (status = ? OR (status = ? AND claimed_until < ?))`,
		stageID, string(EvalPending), string(EvalRunning), core.Micros(core.Now()))
	if err != nil {
		return err
	}
	for _, e := range evals {
		until := core.Micros(core.Now().Add(claimFor))
		ok, err := moveEval(ctx, s.o.DB, e, EvalRunning, "claimed_until = ?", until)
		if err != nil || !ok {
			return err
		}
		e.ClaimedUntil = until
		if err := s.run(ctx, e); err != nil {
			return fmt.Errorf("policy evaluation %s: %w", e.ID, err)
		}
	}
	return nil
}

// run evaluates a claimed evaluation and records its outcomes.
func (s *Service) run(ctx context.Context, e *Evaluation) error {
	sets, err := s.stageSets(ctx, s.o.DB, e.Organization, e.WorkspaceID, "")
	if err != nil {
		return err
	}
	var input map[string]any
	var inputErr error
	if e.Kind == OPA {
		input, inputErr = s.input(ctx, e.RunID)
	}
	var outcomes []*SetOutcome
	for _, set := range sets[e.Kind] {
		o := &SetOutcome{ID: core.NewID(PrefixOutcome), EvaluationID: e.ID, SetID: set.ID, SetName: set.Name, SetDescription: set.Description,
			Overridable: set.Overridable, Kind: set.Kind, Outcomes: []Outcome{}}
		if err := s.evalSet(ctx, set, input, inputErr, o); err != nil {
			return err
		}
		outcomes = append(outcomes, o)
	}
	var total ResultCount
	status := EvalPassed
	for _, o := range outcomes {
		total.add(o.Count)
		if o.Count.MandatoryFailed > 0 || o.Count.Errored > 0 {
			status = EvalFailed
		}
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		ok, err := moveEval(ctx, tx, e, status, "result_count = ?, claimed_until = 0", jsonText(total))
		if err != nil || !ok {
			return err // another server took it over meanwhile: its result counts
		}
		now := core.Micros(core.Now())
		for _, o := range outcomes {
			if _, err := tx.Exec(ctx, `INSERT INTO policy_set_outcomes (id, policy_evaluation_id, policy_set_id, policy_set_name, policy_set_description, overridable, error, outcomes, result_count, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
				o.ID, e.ID, o.SetID, o.SetName, o.SetDescription, o.Overridable, o.Error, jsonText(o.Outcomes), jsonText(o.Count), now); err != nil {
				return err
			}
		}
		return nil
	})
}

// evalSet evaluates one set into o.
func (s *Service) evalSet(ctx context.Context, set *Set, input map[string]any, inputErr error, o *SetOutcome) error {
	modules, policies, err := s.setContent(ctx, set)
	if err != nil {
		return err
	}
	if len(policies) == 0 {
		return nil // nothing to evaluate: the set passes
	}
	fail := func(msg string) {
		o.Error = msg
		for _, p := range policies {
			o.Outcomes = append(o.Outcomes, Outcome{EnforcementLevel: p.Level, Query: p.Query, Status: OutcomeErrored, PolicyName: p.Name, Description: p.Description})
		}
		o.Count = ResultCount{Errored: len(policies)}
		if allAdvisory(policies) {
			// Only advisory policies: the error warns, it does not block.
			o.Count = ResultCount{AdvisoryFailed: len(policies)}
		}
	}
	switch {
	case set.Kind == Sentinel:
		fail("Terrace cannot evaluate Sentinel policies: only OPA policy sets are evaluated. Move the policies to an OPA policy set, or detach this set.")
		return nil
	case inputErr != nil:
		fail("reading the plan for the policy input: " + inputErr.Error())
		return nil
	}
	results, err := evalOPA(ctx, modules, policies, input)
	if err != nil {
		if core.KindOf(err) == core.KindInvalid {
			fail(err.Error())
			return nil
		}
		return err
	}
	o.Outcomes = results
	for _, r := range results {
		switch {
		case r.Status == OutcomePassed:
			o.Count.Passed++
		case r.EnforcementLevel == Advisory:
			o.Count.AdvisoryFailed++
		case r.Status == OutcomeErrored:
			o.Count.Errored++
		default:
			o.Count.MandatoryFailed++
		}
	}
	return nil
}

func allAdvisory(ps []opaPolicy) bool {
	for _, p := range ps {
		if p.Level != Advisory {
			return false
		}
	}
	return true
}

// setContent returns the Rego modules and the queries of a set: the files
// and policies.hcl of its current version when it has one, else its
// policies.
func (s *Service) setContent(ctx context.Context, set *Set) (map[string]string, []opaPolicy, error) {
	if set.CurrentVersionID != "" {
		return s.versionContent(ctx, set)
	}
	modules := map[string]string{}
	var policies []opaPolicy
	for _, id := range set.PolicyIDs {
		p, err := s.loadPolicy(ctx, s.o.DB, id)
		if err != nil {
			return nil, nil, err
		}
		if p.HasContent && strings.TrimSpace(p.Content) != "" {
			modules[p.EnforcePath] = p.Content
		}
		policies = append(policies, opaPolicy{Name: p.Name, Description: p.Description, Query: p.Query, Level: p.EnforcementLevel})
	}
	return modules, policies, nil
}

// input builds the OPA input of a run: the plan (terraform's JSON plan)
// and the run and its workspace, as HCP Terraform passes them.
func (s *Service) input(ctx context.Context, runID string) (map[string]any, error) {
	b, err := s.o.Runs.PlanJSON(ctx, runID)
	if err != nil {
		return nil, err
	}
	var plan map[string]any
	if err := json.Unmarshal(b, &plan); err != nil {
		return nil, fmt.Errorf("decoding the plan JSON: %w", err)
	}
	run, ws, err := s.o.Runs.Input(ctx, runID)
	if err != nil {
		return nil, err
	}
	run["workspace"] = ws
	return map[string]any{"plan": plan, "run": run, "workspace": ws}, nil
}

// Verdict implements runtask.PolicyChecks.
func (s *Service) Verdict(ctx context.Context, q store.Q, stageID string) (runtask.PolicyVerdict, error) {
	v := runtask.PolicyVerdict{Done: true, Overridable: true}
	evals, err := store.All(ctx, q, scanEval, `SELECT `+evalCols+` FROM policy_evaluations WHERE task_stage_id = ?`, stageID)
	if err != nil {
		return v, err
	}
	for _, e := range evals {
		if !e.Status.final() {
			v.Done = false
			continue
		}
		if e.Status != EvalFailed {
			continue
		}
		outcomes, err := store.All(ctx, q, scanOutcome, `SELECT `+outcomeCols+` FROM policy_set_outcomes o JOIN policy_evaluations e ON e.id = o.policy_evaluation_id WHERE o.policy_evaluation_id = ? ORDER BY o.policy_set_name, o.id`, e.ID)
		if err != nil {
			return v, err
		}
		for _, o := range outcomes {
			if o.Count.MandatoryFailed == 0 && o.Count.Errored == 0 {
				continue // passed, or advisory failures only: a warning
			}
			what := fmt.Sprintf("policy set %s", o.SetName)
			if o.Error != "" {
				what += " errored (" + o.Error + ")"
			} else {
				var names []string
				for _, p := range o.Outcomes {
					if p.Status != OutcomePassed && p.EnforcementLevel != Advisory {
						names = append(names, p.PolicyName)
					}
				}
				sort.Strings(names)
				what += " failed: " + strings.Join(names, ", ")
			}
			v.Blocking = append(v.Blocking, what)
			v.Overridable = v.Overridable && o.Overridable
		}
	}
	return v, nil
}

// Ended implements runtask.PolicyChecks.
func (s *Service) Ended(ctx context.Context, q store.Q, stageID string, overridden bool) error {
	evals, err := store.All(ctx, q, scanEval, `SELECT `+evalCols+` FROM policy_evaluations WHERE task_stage_id = ?`, stageID)
	if err != nil {
		return err
	}
	for _, e := range evals {
		switch {
		case overridden && e.Status == EvalFailed:
			_, err = moveEval(ctx, q, e, EvalOverridden, "")
		case !overridden && !e.Status.final():
			_, err = moveEval(ctx, q, e, EvalCanceled, "claimed_until = 0")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// EvaluationIDs implements runtask.PolicyChecks.
func (s *Service) EvaluationIDs(ctx context.Context, stageID string) ([]string, error) {
	return store.All(ctx, s.o.DB, func(sc store.Scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	}, `SELECT id FROM policy_evaluations WHERE task_stage_id = ? ORDER BY kind DESC, id`, stageID)
}

// Evaluations implements runtask.PolicyChecks (the caller read the stage).
func (s *Service) Evaluations(ctx context.Context, stageID string) ([]any, error) {
	evals, err := s.evaluationsOf(ctx, stageID)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(evals))
	for i, e := range evals {
		out[i] = evalJSON(e)
	}
	return out, nil
}

func (s *Service) evaluationsOf(ctx context.Context, stageID string) ([]*Evaluation, error) {
	return store.All(ctx, s.o.DB, scanEval, `SELECT `+evalCols+` FROM policy_evaluations WHERE task_stage_id = ? ORDER BY kind DESC, id`, stageID)
}

// StageOutcomes lists the set outcomes of every evaluation of a task
// stage, by kind then set name (the run page; the caller read the stage's
// run).
func (s *Service) StageOutcomes(ctx context.Context, stageID string) ([]*SetOutcome, error) {
	return store.All(ctx, s.o.DB, scanOutcome, `SELECT `+outcomeCols+` FROM policy_set_outcomes o JOIN policy_evaluations e ON e.id = o.policy_evaluation_id
		WHERE e.task_stage_id = ? ORDER BY e.kind DESC, o.policy_set_name, o.id`, stageID)
}

// readableEval checks that the caller may read the evaluation's run.
func readableEval(ctx context.Context, e *Evaluation) error {
	err := authz.Allows(ctx, authz.RunRead, authz.Resource{Organization: e.Organization, WorkspaceID: e.WorkspaceID, RunID: e.RunID})
	return core.NotFoundAs(err, "policy evaluation %q not found", e.ID)
}

// SetOutcomes lists an evaluation's set outcomes, filtered by status
// (passed, failed, errored) and enforcement level when given (each
// filter a list of alternatives).
func (s *Service) SetOutcomes(ctx context.Context, evalID string, filters []OutcomeFilter) ([]*SetOutcome, error) {
	e, err := scanEval(s.o.DB.QueryRow(ctx, `SELECT `+evalCols+` FROM policy_evaluations WHERE id = ?`, evalID))
	if store.IsNoRows(err) {
		return nil, core.NotFound("policy evaluation %q not found", evalID)
	}
	if err != nil {
		return nil, err
	}
	if err := readableEval(ctx, e); err != nil {
		return nil, err
	}
	all, err := store.All(ctx, s.o.DB, scanOutcome, `SELECT `+outcomeCols+` FROM policy_set_outcomes o JOIN policy_evaluations e ON e.id = o.policy_evaluation_id WHERE o.policy_evaluation_id = ? ORDER BY o.policy_set_name, o.id`, evalID)
	if err != nil || len(filters) == 0 {
		return all, err
	}
	var out []*SetOutcome
	for _, o := range all {
		var kept []Outcome
		for _, p := range o.Outcomes {
			for _, f := range filters {
				if (f.Status == "" || f.Status == p.Status) && (f.EnforcementLevel == "" || f.EnforcementLevel == string(p.EnforcementLevel)) {
					kept = append(kept, p)
					break
				}
			}
		}
		if len(kept) > 0 {
			c := *o
			c.Outcomes = kept
			out = append(out, &c)
		}
	}
	return out, nil
}

// OutcomeFilter is one filter[n] of a set outcome list.
type OutcomeFilter struct {
	Status           string
	EnforcementLevel string
}

// SetOutcome returns one set outcome the caller may read.
func (s *Service) SetOutcome(ctx context.Context, id string) (*SetOutcome, error) {
	o, err := scanOutcome(s.o.DB.QueryRow(ctx, `SELECT `+outcomeCols+` FROM policy_set_outcomes o JOIN policy_evaluations e ON e.id = o.policy_evaluation_id WHERE o.id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("policy set outcome %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	e, err := scanEval(s.o.DB.QueryRow(ctx, `SELECT `+evalCols+` FROM policy_evaluations WHERE id = ?`, o.EvaluationID))
	if err != nil {
		return nil, err
	}
	if err := readableEval(ctx, e); err != nil {
		return nil, core.NotFound("policy set outcome %q not found", id)
	}
	return o, nil
}
