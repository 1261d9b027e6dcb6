package run

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/store"
)

// JobPhase is what a job does for its run; a job that plans may go on to
// apply and then to make the plan's JSON.
type JobPhase string

const (
	PhasePlan  JobPhase = "plan"  // init and plan
	PhaseApply JobPhase = "apply" // apply and the state upload
	// PhasePlanJSON: planjson.go.
)

// phaseVerb is how a run's messages say what a job of the phase was doing.
var phaseVerb = map[JobPhase]string{PhasePlan: "planning", PhaseApply: "applying", PhasePlanJSON: "making the plan's JSON"}

// Signal is what the server tells a running job.
type Signal string

const (
	NoSignal     Signal = ""
	SignalCancel Signal = "cancel" // interrupt terraform and let it stop cleanly
	SignalForce  Signal = "force"  // stop at once (a force-cancel, or the job no longer exists)
)

// Job is a phase of a run claimed by a runner.
type Job struct {
	ID     string
	RunID  string
	Phase  JobPhase
	Run    *Run
	Signal <-chan Signal // in-process runners
	// Lease is how long the claim lasts without a heartbeat, as the
	// server that gave the job says (the job protocol carries it, so a
	// runner heartbeats often enough whatever the server's setting).
	Lease time.Duration
}

// Claim gives the runner the oldest queued job of the run queue, or nil
// when there is none. The claim is a lease that Heartbeat must extend.
func (s *Service) Claim(ctx context.Context, runnerID string) (*Job, error) {
	return s.ClaimFrom(ctx, runnerID, QueueRuns)
}

// ClaimFrom is Claim from one queue: the assessment runner claims from
// QueueAssessments, every other runner (and agent) from QueueRuns.
func (s *Service) ClaimFrom(ctx context.Context, runnerID string, queue Queue) (*Job, error) {
	return s.ClaimPool(ctx, runnerID, queue, "")
}

// ClaimPool is ClaimFrom for the runners of one agent pool: an agent
// claims only its pool's jobs, the server's runners only jobs of no pool.
func (s *Service) ClaimPool(ctx context.Context, runnerID string, queue Queue, pool string) (*Job, error) {
	var job *Job
	var started *Run
	err := s.DB.Tx(ctx, func(tx *store.Tx) error {
		// The oldest queued job, taken in one statement; one of a closed
		// organization waits in the queue (ClosedOrganizationsSQL).
		oldest := `SELECT id FROM jobs WHERE status = 'queued' AND queue = ? AND agent_pool_id = ?` + s.notClosed() + ` ORDER BY created_at, id LIMIT 1`
		pg := tx.Driver().Name() == "postgres"
		if pg {
			oldest += ` FOR UPDATE SKIP LOCKED`
		}
		now := core.Now()
		take := `UPDATE jobs SET status = 'running', runner_id = ?, lease_expires_at = ?, attempts = attempts + 1, updated_at = ?
			WHERE id = (` + oldest + `) RETURNING id, run_id, phase, attempts`
		args := []any{runnerID, core.Micros(now.Add(s.LeaseTTL)), core.Micros(now), string(queue), pool}
		var j Job
		var attempts int
		var r *Run
		if pg {
			// The job and its run, locked, in one statement: a round
			// trip fewer between a run's POST and its plan.
			var doc string
			var vars sql.NullString
			err := tx.QueryRow(ctx, `WITH j AS (`+take+`)
				SELECT j.id, j.run_id, j.phase, j.attempts, r.doc, r.variables FROM j JOIN runs r ON r.id = j.run_id FOR UPDATE OF r`, args...).
				Scan(&j.ID, &j.RunID, &j.Phase, &attempts, &doc, &vars)
			if store.IsNoRows(err) {
				return nil
			}
			if err != nil {
				return err
			}
			if r, err = decodeRun(s.Keys, doc, vars); err != nil {
				return err
			}
		} else {
			if err := tx.QueryRow(ctx, take, args...).Scan(&j.ID, &j.RunID, &j.Phase, &attempts); err != nil {
				if store.IsNoRows(err) {
					return nil
				}
				return err
			}
			var err error
			if r, err = getRun(ctx, tx, s.Keys, "id", j.RunID, true); err != nil {
				return err
			}
		}
		// A first attempt's log has no chunks to clear (a plan goes
		// back to the queue with its attempts counted).
		if err := s.startPhase(ctx, tx, r, j.Phase, attempts == 1); err != nil {
			return err
		}
		j.Run, job, started = r, &j, r
		return nil
	})
	if err != nil || job == nil {
		return nil, err
	}
	ch := make(chan Signal, 2)
	s.mu.Lock()
	s.signals[job.RunID] = ch
	s.mu.Unlock()
	job.Signal = ch
	// The runner starts without waiting for the observers of the run's
	// move to planning or applying (they still hear it before the run's
	// next change).
	s.changedLater(ctx, started)
	return job, nil
}

// notClosed is the condition on jobs that leaves out those of the
// organizations ClosedOrganizationsSQL lists ("" when none is set).
func (s *Service) notClosed() string {
	if s.ClosedOrganizationsSQL == "" {
		return ""
	}
	return ` AND NOT EXISTS (SELECT 1 FROM runs cr WHERE cr.id = jobs.run_id AND cr.organization_name IN (` + s.ClosedOrganizationsSQL + `))`
}

// startPhase moves the run into planning or applying and opens the
// phase's log; fresh says that the log was never opened before (nothing
// to clear). more are writes sent along with the run's (updateRunWith).
func (s *Service) startPhase(ctx context.Context, tx store.Q, r *Run, phase JobPhase, fresh bool, more ...write) error {
	logID := r.Plan.ID
	if phase == PhasePlan {
		if err := r.transition(Planning); err != nil {
			return err
		}
		r.Plan.setPhase(PhaseRunning)
	} else {
		if err := r.transition(Applying); err != nil {
			return err
		}
		r.Apply.setPhase(PhaseRunning)
		logID = r.Apply.ID
	}
	if !fresh {
		if err := dropChunks(ctx, tx, logID); err != nil {
			return err
		}
	}
	return updateRunWith(ctx, tx, r, append(more, openLog(logID))...)
}

// Heartbeat extends a job's lease and returns any signal for it. A job that
// no longer exists answers SignalForce.
func (s *Service) Heartbeat(ctx context.Context, jobID, runnerID string) (Signal, error) {
	now := core.Now()
	extend := `UPDATE jobs SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND runner_id = ? AND status = 'running'`
	args := []any{core.Micros(now.Add(s.LeaseTTL)), core.Micros(now), jobID, runnerID}
	var sig Signal
	if s.DB.Driver().Name() == "postgres" {
		// One round trip: the lease extended and the signal read back
		// (PostgreSQL reads and writes through one pool; SQLite writes
		// only through its writer, so it keeps two statements, which
		// cost no round trip there).
		err := s.DB.QueryRow(ctx, extend+` RETURNING signal`, args...).Scan(&sig)
		if store.IsNoRows(err) {
			return SignalForce, nil
		}
		if err != nil {
			return NoSignal, err
		}
		return sig, nil
	}
	res, err := s.DB.Exec(ctx, extend, args...)
	if err != nil {
		return NoSignal, err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return SignalForce, nil
	}
	err = s.DB.QueryRow(ctx, `SELECT signal FROM jobs WHERE id = ?`, jobID).Scan(&sig)
	return sig, err
}

// JobInfo is who may act on a job: its run, phase, agent pool ("" for the
// server's own runners) and the runner holding it; and what of its run a
// call on the job checks without reading the run (its workspace and the
// IDs of its logs).
type JobInfo struct {
	ID, RunID              string
	Phase                  JobPhase
	Pool, RunnerID, Status string
	WorkspaceID            string
	PlanID, ApplyID        string
}

// JobInfo returns a job's holder and pool (404 when it no longer exists).
func (s *Service) JobInfo(ctx context.Context, jobID string) (*JobInfo, error) {
	j := &JobInfo{ID: jobID}
	err := s.DB.QueryRow(ctx, `SELECT j.run_id, j.phase, j.agent_pool_id, j.runner_id, j.status, r.workspace_id, r.plan_id, r.apply_id
		FROM jobs j JOIN runs r ON r.id = j.run_id WHERE j.id = ?`, jobID).
		Scan(&j.RunID, &j.Phase, &j.Pool, &j.RunnerID, &j.Status, &j.WorkspaceID, &j.PlanID, &j.ApplyID)
	if store.IsNoRows(err) {
		return nil, core.NotFound("job %s no longer exists (the run was force-canceled or its lease expired)", jobID)
	}
	return j, err
}

// WaitSignal waits up to d for a cancel signal to the run's job given on
// this replica (NoSignal when none came). Heartbeats wait here, so that a
// runner hears of a cancel at once without polling.
func (s *Service) WaitSignal(ctx context.Context, runID string, d time.Duration) Signal {
	s.mu.Lock()
	ch := s.signals[runID] // nil (blocks forever) when the job was claimed on another replica
	s.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case sig := <-ch:
		return sig
	case <-t.C:
	case <-ctx.Done():
	}
	return NoSignal
}

// PlanResult is what a runner reports when a plan ends.
type PlanResult struct {
	Error                                     string // "" when the plan succeeded
	Canceled                                  bool
	HasChanges                                bool
	Additions, Changes, Destructions, Imports int
	// GeneratedConfig: the plan generated configuration for import
	// blocks (Phase.GeneratedConfig).
	GeneratedConfig    bool   `json:",omitempty"`
	PlanJSON           []byte // terraform show -json of the plan
	RedactedJSON       []byte // the same without sensitive values
	PlanFile, LockFile []byte // kept when the run waits for confirmation
	// JSONLater: PlanJSON and RedactedJSON are left out and come with
	// SavePlanJSON from the same job, after (or, for a FromCLI run,
	// beside) the apply (the counts are terraform's summary line). Only
	// for a run that goes straight on to apply.
	JSONLater bool `json:",omitempty"`
	// EngineVersion is the exact version the plan ran with ("1.9.5",
	// "tofu:1.8.0") when the run named none ("latest", a constraint):
	// recorded as the run's version, so that its apply uses the same
	// (engine.Chosen). A runner that predates it sends none.
	EngineVersion string `json:",omitempty"`
	// Log is the end of the phase's log that the runner has not sent as
	// a chunk (already masked): it is added before the log is closed, so
	// that ending a phase is one call, not a last chunk and then the
	// report.
	Log []byte `json:",omitempty"`
}

func (s *Service) ownJob(ctx context.Context, q store.Q, jobID, runnerID string) (string, JobPhase, error) {
	var runID, holder, status string
	var phase JobPhase
	err := q.QueryRow(ctx, `SELECT run_id, phase, runner_id, status FROM jobs WHERE id = ?`+store.ForUpdate(q), jobID).Scan(&runID, &phase, &holder, &status)
	if store.IsNoRows(err) {
		return "", "", core.NotFound("job %s no longer exists (the run was force-canceled or its lease expired)", jobID)
	}
	if err != nil {
		return "", "", err
	}
	if holder != runnerID || status != "running" {
		return "", "", core.Conflict("job %s is not held by runner %s", jobID, runnerID)
	}
	return runID, phase, nil
}

// updateHeld is update for a runner's report on its job (heldRun).
func (s *Service) updateHeld(ctx context.Context, jobID, runnerID string, fn func(tx *store.Tx, r *Run) ([]*Run, error)) (*Run, error) {
	return s.updateWith(ctx, s.heldRun(ctx, jobID, runnerID), fn)
}

// heldRun is the locking read of a report's run: the job's run and the
// job's holder are read and locked in one statement (the run's row first,
// as every other writer of both locks them), and the update goes on only
// while runnerID still holds the job.
func (s *Service) heldRun(ctx context.Context, jobID, runnerID string) func(tx *store.Tx) (*Run, error) {
	return func(tx *store.Tx) (*Run, error) {
		var doc string
		var vars sql.NullString
		var holder, status string
		err := tx.QueryRow(ctx, `SELECT r.doc, r.variables, j.runner_id, j.status FROM runs r JOIN jobs j ON j.run_id = r.id WHERE j.id = ?`+store.ForUpdate(tx), jobID).
			Scan(&doc, &vars, &holder, &status)
		if store.IsNoRows(err) {
			return nil, core.NotFound("job %s no longer exists (the run was force-canceled or its lease expired)", jobID)
		}
		if err != nil {
			return nil, err
		}
		if holder != runnerID || status != "running" {
			return nil, core.Conflict("job %s is not held by runner %s", jobID, runnerID)
		}
		return decodeRun(s.Keys, doc, vars)
	}
}

// FinishPlan records a plan's outcome. It returns true when the run goes
// straight on to apply and the runner should apply the plan it holds in
// the same job (auto-apply with nothing in between).
func (s *Service) FinishPlan(ctx context.Context, jobID, runnerID string, res PlanResult) (bool, error) {
	var steps stepTimer
	done := steps.time("read")
	r, err := s.runOfJob(ctx, jobID)
	done()
	if r == nil {
		return false, err // nil: force-canceled meanwhile, nothing to record
	}
	runID, read := r.ID, r
	defer s.logSteps("plan reported", runID, &steps)
	s.reported()
	// Blobs first, side by side: the run only says "planned" once they
	// are stored.
	tail := string(res.Log)
	if res.Error != "" && !res.Canceled {
		tail += "\n" + res.Error + "\n"
	}
	writes := []func() error{func() error {
		defer steps.time("log")()
		return s.foldLog(ctx, r.Plan.ID, tail)
	}}
	puts := map[string][]byte{"json": res.PlanJSON, "json-redacted": res.RedactedJSON, "tfplan": res.PlanFile, "lock": res.LockFile}
	for name, data := range puts {
		if data != nil {
			writes = append(writes, func() error {
				defer steps.time(name)()
				return s.Blobs.Put(ctx, planKey(r.Plan.ID, name), data)
			})
		}
	}
	if err := together(writes...); err != nil {
		s.dropIfDeleted(ctx, read, err)
		return false, err
	}
	defer steps.time("update")()
	cont := false
	r, changed, err := s.commitWith(ctx, s.heldRun(ctx, jobID, runnerID), func(tx *store.Tx, r *Run) ([]*Run, error) {
		// The log's chunks go with the outcome's write (its blob is
		// stored): dropped here on the paths that write nothing else.
		drop := dropLog(r.Plan.ID)
		r.Plan.HasChanges, r.HasChanges = res.HasChanges, res.HasChanges
		r.Plan.Additions, r.Plan.Changes, r.Plan.Destructions, r.Plan.Imports = res.Additions, res.Changes, res.Destructions, res.Imports
		r.Plan.GeneratedConfig = res.GeneratedConfig
		if !engine.Exact(r.TerraformVersion) && engine.Exact(res.EngineVersion) {
			r.TerraformVersion = res.EngineVersion
		}
		switch {
		case res.Canceled:
			r.Plan.setPhase(PhaseCanceled)
			if err := r.transition(Canceled); err != nil {
				return nil, err
			}
			return s.finishJob(ctx, tx, jobID, r, drop)
		case res.Error != "":
			r.Plan.setPhase(PhaseErrored)
			if err := r.transition(Errored); err != nil {
				return nil, err
			}
			r.ErrorMessage = firstLine(res.Error)
			return s.finishJob(ctx, tx, jobID, r, drop)
		}
		r.Plan.setPhase(PhaseFinished)
		{
			wait, err := s.stageStart(ctx, tx, r, StagePostPlan)
			if err != nil {
				return nil, err
			}
			if wait {
				// The run rests in its post-plan task stage, holding
				// the workspace; StageDone moves it on.
				if err := r.transition(Planned); err != nil {
					return nil, err
				}
				if err := r.transition(PostPlanRunning); err != nil {
					return nil, err
				}
				s.dropSignal(r.ID)
				return nil, updateRunWith(ctx, tx, r, endJob(jobID), drop)
			}
		}
		if r.PlanOnly || (!res.HasChanges && !r.AllowEmptyApply) {
			if err := r.transition(PlannedAndFinished); err != nil {
				return nil, err
			}
			return s.finishJob(ctx, tx, jobID, r, drop)
		}
		if err := r.transition(Planned); err != nil {
			return nil, err
		}
		next, err := s.afterPlan(r)
		if err != nil {
			return nil, err
		}
		if next == ApplyQueued && !r.CancelRequestedAt.IsZero() {
			next = Canceled
		}
		if next == ApplyQueued {
			wait, err := s.stageStart(ctx, tx, r, StagePreApply)
			if err != nil {
				return nil, err
			}
			if wait {
				// Auto-applied, but pre-apply tasks come first: the
				// apply job starts from the saved plan once they pass.
				if err := r.transition(Confirmed); err != nil {
					return nil, err
				}
				if err := r.transition(PreApplyRunning); err != nil {
					return nil, err
				}
				s.dropSignal(r.ID)
				return nil, updateRunWith(ctx, tx, r, endJob(jobID), drop)
			}
		}
		switch next {
		case ApplyQueued:
			// Continue in the same job: the runner applies the plan it holds.
			if err := r.transition(ApplyQueued); err != nil {
				return nil, err
			}
			r.Apply.setPhase(PhaseQueued)
			r.PlanJSONLater = res.JSONLater && res.PlanJSON == nil
			// A run applies once (a lost apply errors the run): its
			// apply log was never opened. The job's phase is written in
			// the same statement as the run (PostgreSQL).
			if err := s.startPhase(ctx, tx, r, PhaseApply, true, write{`UPDATE jobs SET phase = ?, updated_at = ? WHERE id = ?`,
				[]any{string(PhaseApply), core.Micros(core.Now()), jobID}}, drop); err != nil {
				return nil, err
			}
			cont = true
			return nil, nil
		case Canceled:
			if err := r.transition(Canceled); err != nil {
				return nil, err
			}
			cancelPhases(r)
			return s.finishJob(ctx, tx, jobID, r, drop)
		case PlannedAndSaved:
			// A saved plan waits without holding the workspace.
			if err := r.transition(PlannedAndSaved); err != nil {
				return nil, err
			}
			return s.finishJob(ctx, tx, jobID, r, drop)
		default:
			if next != Planned {
				if err := r.transition(next); err != nil {
					return nil, err
				}
			}
			// The run rests, waiting for confirmation; the workspace stays held.
			s.dropSignal(r.ID)
			return nil, updateRunWith(ctx, tx, r, endJob(jobID), drop)
		}
	})
	switch {
	case err != nil:
		s.dropIfDeleted(ctx, read, err)
		return false, err
	case cont:
		// The runner applies at once: it hears so before the observers
		// have looked at the run's moves (they still hear them before
		// its next change).
		s.changedLater(ctx, r)
	default:
		s.changed(ctx, changed...)
	}
	return cont, nil
}

// afterPlan decides where a planned run with changes goes next. Stages
// that run between plan and apply (run tasks, policy checks) plug in here.
func (s *Service) afterPlan(r *Run) (Status, error) {
	switch {
	case r.SavePlan:
		return PlannedAndSaved, nil
	case r.AutoApply:
		return ApplyQueued, nil
	}
	return Planned, nil
}

// ApplyResult is what a runner reports when an apply ends.
type ApplyResult struct {
	Error                                     string
	Canceled                                  bool
	Additions, Changes, Destructions, Imports int
	// State is the state terraform left (also after a failed or
	// interrupted apply); nil when it did not change.
	State []byte
	// Log is the end of the apply's log not yet sent as a chunk
	// (PlanResult.Log).
	Log []byte `json:",omitempty"`
}

// StateSink stores the state an apply produced as a new state version.
type StateSink interface {
	CreateFromRun(ctx context.Context, workspaceID, runID string, state []byte) error
}

// FinishApply records an apply's outcome; the state is stored first.
func (s *Service) FinishApply(ctx context.Context, jobID, runnerID string, res ApplyResult, states StateSink) error {
	var steps stepTimer
	done := steps.time("read")
	r, err := s.runOfJob(ctx, jobID)
	done()
	if r == nil {
		return err // nil: force-canceled meanwhile, nothing to record
	}
	runID := r.ID
	defer s.logSteps("apply reported", runID, &steps)
	s.reported()
	// The new state and the folded log do not depend on each other: both
	// are stored, side by side, before the outcome is recorded (the run is
	// never applied without its state version, nor ended without its log).
	tail := string(res.Log)
	if res.Error != "" && !res.Canceled {
		tail += "\n" + res.Error + "\n"
	}
	stateErr := ""
	writes := []func() error{func() error {
		defer steps.time("log")()
		return s.foldLog(ctx, r.Apply.ID, tail)
	}}
	if res.State != nil {
		writes = append(writes, func() error {
			defer steps.time("state")()
			if err := states.CreateFromRun(ctx, r.WorkspaceID, r.ID, res.State); err != nil {
				stateErr = fmt.Sprintf("storing the new state failed: %v", err)
			}
			return nil
		})
	}
	if err := together(writes...); err != nil {
		s.dropIfDeleted(ctx, r, err)
		return err
	}
	if stateErr != "" {
		// The log was folded before the state failed: it ends with why.
		if err := s.appendToEndedLog(ctx, r.Apply.ID, "\n"+stateErr+"\n"); err != nil {
			return err
		}
	}
	defer steps.time("update")()
	var staleIDs []string
	_, err = s.updateHeld(ctx, jobID, runnerID, func(tx *store.Tx, r *Run) ([]*Run, error) {
		drop := dropLog(r.Apply.ID) // with the outcome's write
		r.Apply.Additions, r.Apply.Changes, r.Apply.Destructions, r.Apply.Imports = res.Additions, res.Changes, res.Destructions, res.Imports
		switch {
		case res.Canceled:
			r.Apply.setPhase(PhaseCanceled)
			if err := r.transition(Canceled); err != nil {
				return nil, err
			}
		case res.Error != "" || stateErr != "":
			r.Apply.setPhase(PhaseErrored)
			if err := r.transition(Errored); err != nil {
				return nil, err
			}
			r.ErrorMessage = firstLine(res.Error + stateErr)
		default:
			r.Apply.setPhase(PhaseFinished)
			post, err := s.stageStart(ctx, tx, r, StagePostApply)
			if err != nil {
				return nil, err
			}
			to := Applied
			if post {
				to = PostApplyRunning
			}
			if err := r.transition(to); err != nil {
				return nil, err
			}
		}
		var stale []*Run
		if res.State != nil && stateErr == "" {
			var err error
			if stale, err = s.discardSavedPlans(ctx, tx, r); err != nil {
				return nil, err
			}
		}
		staleIDs = staleIDs[:0]
		for _, o := range stale {
			staleIDs = append(staleIDs, o.ID)
		}
		if r.PlanJSONLater {
			// The job goes on to make the plan's JSON (PhasePlanJSON): the
			// run has its outcome and releases the workspace as usual.
			// The run's outcome is written with the job's phase (and the
			// workspace's release), in one statement on PostgreSQL.
			phase := write{`UPDATE jobs SET phase = ?, updated_at = ? WHERE id = ?`, []any{string(PhasePlanJSON), core.Micros(core.Now()), jobID}}
			s.dropSignal(r.ID)
			if r.Status == PostApplyRunning {
				return stale, updateRunWith(ctx, tx, r, phase, drop)
			}
			next, err := s.release(ctx, tx, r, phase, drop)
			return append(stale, next...), err
		}
		if r.Status == PostApplyRunning {
			// The run holds the workspace until its post-apply tasks end.
			s.dropSignal(r.ID)
			return stale, updateRunWith(ctx, tx, r, endJob(jobID), drop)
		}
		next, err := s.finishJob(ctx, tx, jobID, r, drop)
		return append(stale, next...), err
	})
	if err == nil {
		for _, name := range []string{"tfplan", "lock"} {
			_ = s.Blobs.Delete(ctx, planKey(r.Plan.ID, name))
		}
		// The saved plans this apply made stale keep no plan file either.
		s.dropPlanFiles(ctx, staleIDs...)
	}
	s.dropIfDeleted(ctx, r, err)
	return err
}

// discardSavedPlans discards the saved plans of a workspace whose state
// the run r has just changed: they were planned against the old state. As
// in HCP Terraform, terraform then refuses such a plan file with "Saved
// plan is discarded … either another run was applied first".
// savedPlansWhere selects a workspace's saved plans other than a run's
// through the partial index runs_saved_plans (migration 1032), which holds
// saved plans only: the status is written out, as both planners match a
// partial index's predicate only against a literal.
const savedPlansWhere = `workspace_id = ? AND status = '` + string(PlannedAndSaved) + `' AND id <> ?`

func (s *Service) discardSavedPlans(ctx context.Context, tx store.Q, r *Run) ([]*Run, error) {
	saved, err := listRuns(ctx, tx, s.Keys, savedPlansWhere+store.ForUpdate(tx), r.WorkspaceID, r.ID)
	if err != nil {
		return nil, err
	}
	for _, o := range saved {
		if err := o.transition(Discarded); err != nil {
			return nil, err
		}
		if err := addEvent(ctx, tx, o.ID, "discarded", "Discarded because run "+r.ID+" changed the workspace's state first: the saved plan is stale", ""); err != nil {
			return nil, err
		}
		if err := updateRun(ctx, tx, o); err != nil {
			return nil, err
		}
	}
	return saved, nil
}

func (s *Service) finishJob(ctx context.Context, tx store.Q, jobID string, r *Run, more ...write) ([]*Run, error) {
	// The run's outcome, the job's end, the workspace's release and the
	// caller's writes (more) in one statement on PostgreSQL.
	s.dropSignal(r.ID)
	return s.release(ctx, tx, r, append([]write{endJob(jobID)}, more...)...)
}

// endJob is the write that removes a job whose phase has ended.
func endJob(jobID string) write { return write{`DELETE FROM jobs WHERE id = ?`, []any{jobID}} }

func (s *Service) dropSignal(runID string) {
	s.mu.Lock()
	delete(s.signals, runID)
	s.mu.Unlock()
}

// PlanBlob returns a stored artifact of a plan: "json", "json-redacted",
// "tfplan" or "lock".
func (s *Service) PlanBlob(ctx context.Context, planID, name string) ([]byte, error) {
	return s.Blobs.Get(ctx, planKey(planID, name))
}

func planKey(planID, name string) string { return "plans/" + planID + "/" + name }

// planBlobs are the names of the blobs a plan may keep (planKey): its
// JSON, the redacted JSON, the plan file and the dependency lock file an
// apply needs.
var planBlobs = []string{"json", "json-redacted", "tfplan", "lock"}

// runBlobs are the keys of every blob a run with these plan and apply IDs
// may have: its plan's and apply's logs (logKey) and its plan's blobs.
func runBlobs(planID, applyID string) []string {
	keys := []string{logKey(planID), logKey(applyID)}
	for _, name := range planBlobs {
		keys = append(keys, planKey(planID, name))
	}
	return keys
}

// runBlobKeys are runBlobs as SQL expressions over a row of runs: each key
// a string literal with the row's IDs concatenated in.
var runBlobKeys = func() []string {
	var exprs []string
	for _, k := range runBlobs(`' || plan_id || '`, `' || apply_id || '`) {
		exprs = append(exprs, `'`+k+`'`)
	}
	return exprs
}()

// garbage is the ledger of run blobs awaiting deletion (DeleteWorkspaceRuns).
func (s *Service) garbage() blob.Garbage {
	return blob.Garbage{DB: s.DB, Blobs: s.Blobs, Table: "run_garbage", What: "run log or plan", Logger: s.Logger}
}

// Ledger is the ledger of run blobs awaiting deletion, for the server's
// sweep loop (blob.RunAll).
func (s *Service) Ledger() blob.Garbage { return s.garbage() }

// ReapExpired handles jobs whose runner stopped heartbeating. With
// lostPrefix set it also takes every running job of runners whose ID has
// that prefix, other than keep: in-process runners of an earlier server
// process, gone for certain. A lost plan goes back to the queue (up to
// three attempts); a lost apply errors the run with a message saying why.
func (s *Service) ReapExpired(ctx context.Context, lostPrefix, keep string) (int, error) {
	type lost struct {
		id, runID, runner string
		phase             JobPhase
	}
	rows, err := s.DB.Query(ctx, `SELECT id, run_id, phase, runner_id, lease_expires_at FROM jobs WHERE status = 'running'`)
	if err != nil {
		return 0, err
	}
	var found []lost
	now := core.Micros(core.Now())
	for rows.Next() {
		var l lost
		var exp int64
		if err := rows.Scan(&l.id, &l.runID, &l.phase, &l.runner, &exp); err != nil {
			rows.Close()
			return 0, err
		}
		restarted := lostPrefix != "" && strings.HasPrefix(l.runner, lostPrefix) && l.runner != keep
		if exp < now || restarted {
			found = append(found, l)
		}
	}
	rows.Close()
	for _, l := range found {
		why := "its runner stopped sending heartbeats"
		if lostPrefix != "" && strings.HasPrefix(l.runner, lostPrefix) && l.runner != keep {
			why = "the server restarted"
		}
		if l.phase == PhasePlanJSON {
			// The run has its outcome; only its plan's JSON was still to
			// come, and now never does: a read waiting for it ends (204).
			_, err := s.update(ctx, l.runID, func(tx *store.Tx, r *Run) ([]*Run, error) {
				r.PlanJSONLater = false
				_, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = ?`, l.id)
				return nil, err
			})
			if err != nil {
				return 0, fmt.Errorf("recovering job %s: %w", l.id, err)
			}
			continue
		}
		closeLog := ""
		_, err := s.update(ctx, l.runID, func(tx *store.Tx, r *Run) ([]*Run, error) {
			var attempts int
			if err := tx.QueryRow(ctx, `SELECT attempts FROM jobs WHERE id = ?`, l.id).Scan(&attempts); err != nil {
				return nil, err
			}
			if l.phase == PhasePlan && attempts < 3 && r.Status == Planning {
				// Nothing was applied: plan again (the log restarts when it is claimed).
				if _, err := tx.Exec(ctx, `UPDATE jobs SET status = 'queued', runner_id = '', lease_expires_at = 0, updated_at = ? WHERE id = ?`, now, l.id); err != nil {
					return nil, err
				}
				if err := r.transition(PlanQueued); err != nil {
					return nil, err
				}
				r.Plan.setPhase(PhaseQueued)
				return nil, addEvent(ctx, tx, r.ID, "requeued", fmt.Sprintf("The plan was re-queued because %s before it finished.", why), "")
			}
			if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = ?`, l.id); err != nil {
				return nil, err
			}
			msg := fmt.Sprintf("The run errored because %s while it was %s.", why, phaseVerb[l.phase])
			if l.phase == PhaseApply {
				msg += " Resources may have been changed; the workspace keeps the last state terraform saved."
				closeLog = r.Apply.ID
			} else {
				closeLog = r.Plan.ID
			}
			return s.fail(ctx, tx, r, msg)
		})
		if err != nil {
			return 0, fmt.Errorf("recovering job %s: %w", l.id, err)
		}
		if closeLog != "" {
			if err := s.endLog(ctx, closeLog, "\n"+why+"\n"); err != nil {
				return 0, err
			}
		}
	}
	if len(found) > 0 {
		s.nudge() // re-queued plans wake the claims waiting for work
	}
	return len(found), nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
