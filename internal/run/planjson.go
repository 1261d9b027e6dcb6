package run

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// PlanDescription is a plan's JSON uploaded after the plan was reported
// (PlanResult.JSONLater): terraform show -json, its redacted form, and
// the counts taken from it. Error instead says why the runner could not
// make it (then nothing else is sent and no JSON comes).
type PlanDescription struct {
	PlanJSON, RedactedJSON                    []byte
	Additions, Changes, Destructions, Imports int
	Error                                     string `json:",omitempty"`
}

// PhasePlanJSON is the phase of a job whose run has its outcome (the
// apply was reported) and that still makes the plan's JSON: the job
// keeps its lease, and ends with SavePlanJSON or when its lease expires.
const PhasePlanJSON JobPhase = "plan-json"

// SavePlanJSON stores the JSON of a plan that was reported without it,
// made by the job that applied it (beside the apply, phase "apply", or
// after it, PhasePlanJSON), and clears the run's PlanJSONLater (a read
// waiting for the JSON watches that flag). The counts reported with the
// plan came from terraform's summary line; the JSON's are kept. An
// upload with Error only clears the flag: the JSON never comes. A job in
// PhasePlanJSON ends here.
func (s *Service) SavePlanJSON(ctx context.Context, jobID, runnerID string, d PlanDescription) error {
	if d.Error == "" && (d.PlanJSON == nil || d.RedactedJSON == nil) {
		return core.Invalid("the plan JSON and the redacted plan JSON are both required (or an error saying why they could not be made)")
	}
	runID, phase, err := s.ownJob(ctx, s.DB, jobID, runnerID)
	if err != nil {
		return err
	}
	r, err := s.get(ctx, runID)
	if err != nil {
		return err
	}
	if (phase != PhaseApply && phase != PhasePlanJSON) || !r.PlanJSONLater {
		return core.Conflict("run %s has its plan's JSON: nothing waits for it", runID)
	}
	s.reported()
	if d.Error == "" {
		for name, data := range map[string][]byte{"json": d.PlanJSON, "json-redacted": d.RedactedJSON} {
			if err := s.Blobs.Put(ctx, planKey(r.Plan.ID, name), data); err != nil {
				s.dropIfDeleted(ctx, r, err)
				return err
			}
		}
	}
	// No status changes: no transition, no listeners.
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, phase, err = s.ownJob(ctx, tx, jobID, runnerID); err != nil {
			return err
		}
		r, err := getRun(ctx, tx, s.Keys, "id", runID, true)
		if err != nil {
			return err
		}
		r.PlanJSONLater = false
		if d.Error == "" {
			r.Plan.Additions, r.Plan.Changes, r.Plan.Destructions, r.Plan.Imports = d.Additions, d.Changes, d.Destructions, d.Imports
		}
		if phase == PhasePlanJSON {
			if _, err := tx.Exec(ctx, `DELETE FROM jobs WHERE id = ?`, jobID); err != nil {
				return err
			}
		}
		return updateRun(ctx, tx, r)
	})
	s.dropIfDeleted(ctx, r, err)
	return err
}

// PlanJSONWait bounds how long a read of a plan's JSON waits for JSON
// that the run's job is still making; then the reader is told to retry.
const PlanJSONWait = 15 * time.Second

// planJSONPoll is how often a waiting read looks for the JSON again.
const planJSONPoll = 20 * time.Millisecond

// PlanJSON returns a plan's JSON ("json" or "json-redacted"). When the
// plan was reported without it and its job is still applying or making
// it (the runner makes it after the apply was reported, or beside the
// apply for a CLI-driven run, and uploads it before the job ends), the
// JSON is on its way: the read waits for it, as HCP Terraform has a
// finished plan's JSON at once, up to PlanJSONWait, and then answers 429
// with Retry-After, which go-tfe and terraform's cloud backend retry.
// The wait watches the run's row (SavePlanJSON clears PlanJSONLater) and,
// once the run has its outcome, that its job still exists (a job whose
// runner died is reaped when its lease expires, which clears the flag).
// A plan without JSON otherwise is KindNotFound (served as 204).
func (s *Service) PlanJSON(ctx context.Context, r *Run, name string) ([]byte, error) {
	key := planKey(r.Plan.ID, name)
	b, err := s.Blobs.Get(ctx, key)
	if core.KindOf(err) != core.KindNotFound || !r.PlanJSONLater {
		return b, err
	}
	deadline := time.Now().Add(s.planJSONWait)
	tick := time.NewTicker(planJSONPoll)
	defer tick.Stop()
	for {
		pending, err := s.jsonPending(ctx, r)
		if err != nil {
			return nil, err
		}
		if !pending {
			break
		}
		if time.Now().After(deadline) {
			return nil, &core.Error{Kind: core.KindTooManyRequests, Detail: "the plan's JSON is still being made by the run's job; retry in a moment"}
		}
		if s.onPlanJSONWait != nil {
			s.onPlanJSONWait()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		if r, err = s.get(ctx, r.ID); err != nil {
			return nil, err
		}
	}
	// Uploaded, or its job is gone: the JSON is there now or never comes.
	return s.Blobs.Get(ctx, key)
}

// jsonPending reports whether r's plan JSON is still being made by the
// job that applies it: the run is applying, or it has its outcome and
// its job is in PhasePlanJSON.
func (s *Service) jsonPending(ctx context.Context, r *Run) (bool, error) {
	if !r.PlanJSONLater {
		return false, nil
	}
	if r.Status == ApplyQueued || r.Status == Applying {
		return true, nil
	}
	var n int
	err := s.DB.QueryRow(ctx, `SELECT COUNT(*) FROM jobs WHERE run_id = ? AND phase = ?`, r.ID, string(PhasePlanJSON)).Scan(&n)
	return n > 0, err
}
