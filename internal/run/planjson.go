package run

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// PlanDescription is a plan's JSON uploaded after the plan was reported
// (PlanResult.JSONLater): terraform show -json, its redacted form, and
// the counts taken from it.
type PlanDescription struct {
	PlanJSON, RedactedJSON                    []byte
	Additions, Changes, Destructions, Imports int
}

// SavePlanJSON stores the JSON of a plan that was reported without it,
// while the job that planned it applies, and clears the run's
// PlanJSONLater (a read waiting for the JSON watches that flag). The
// counts reported with the plan came from terraform's summary line; the
// JSON's are kept.
func (s *Service) SavePlanJSON(ctx context.Context, jobID, runnerID string, d PlanDescription) error {
	if d.PlanJSON == nil || d.RedactedJSON == nil {
		return core.Invalid("the plan JSON and the redacted plan JSON are both required")
	}
	runID, phase, err := s.ownJob(ctx, s.DB, jobID, runnerID)
	if err != nil {
		return err
	}
	r, err := s.get(ctx, runID)
	if err != nil {
		return err
	}
	if phase != "apply" || !r.PlanJSONLater {
		return core.Conflict("run %s has its plan's JSON: nothing waits for it", runID)
	}
	for name, data := range map[string][]byte{"json": d.PlanJSON, "json-redacted": d.RedactedJSON} {
		if err := s.Blobs.Put(ctx, planKey(r.Plan.ID, name), data); err != nil {
			return err
		}
	}
	// No status changes: no transition, no listeners.
	return s.DB.Tx(ctx, func(tx *store.Tx) error {
		r, err := getRun(ctx, tx, s.Keys, "id", runID, true)
		if err != nil {
			return err
		}
		r.PlanJSONLater = false
		r.Plan.Additions, r.Plan.Changes, r.Plan.Destructions, r.Plan.Imports = d.Additions, d.Changes, d.Destructions, d.Imports
		return updateRun(ctx, tx, r)
	})
}

// PlanJSONWait bounds how long a read of a plan's JSON waits for JSON
// that the run's job is still making; then the reader is told to retry.
const PlanJSONWait = 15 * time.Second

// planJSONPoll is how often a waiting read looks for the JSON again.
const planJSONPoll = 20 * time.Millisecond

// PlanJSON returns a plan's JSON ("json" or "json-redacted"). When the
// plan was reported without it and its job is still applying, the JSON
// is on its way (the runner makes it beside the apply and uploads it
// before the job ends): the read waits for it, as HCP Terraform has a
// finished plan's JSON at once, up to PlanJSONWait, and then answers
// 429 with Retry-After, which go-tfe and terraform's cloud backend retry.
// The wait watches the run's row (SavePlanJSON clears PlanJSONLater), not
// the blob store. A plan without JSON otherwise is KindNotFound (served
// as 204).
func (s *Service) PlanJSON(ctx context.Context, r *Run, name string) ([]byte, error) {
	key := planKey(r.Plan.ID, name)
	b, err := s.Blobs.Get(ctx, key)
	if core.KindOf(err) != core.KindNotFound || !jsonPending(r) {
		return b, err
	}
	deadline := time.Now().Add(s.planJSONWait)
	tick := time.NewTicker(planJSONPoll)
	defer tick.Stop()
	for jsonPending(r) {
		if time.Now().After(deadline) {
			return nil, &core.Error{Kind: core.KindTooManyRequests, Detail: "the plan's JSON is still being made while the run applies; retry in a moment"}
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
	// Uploaded, or the run went past applying: the job uploads before it
	// reports the apply, so the JSON is there now or never comes.
	return s.Blobs.Get(ctx, key)
}

// jsonPending reports whether r's plan JSON is still being made by the
// job that applies it.
func jsonPending(r *Run) bool {
	return r.PlanJSONLater && (r.Status == ApplyQueued || r.Status == Applying)
}
