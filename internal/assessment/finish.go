package assessment

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// RunTransition records an assessment when its run ends. It is a
// run.Service observer; other runs are ignored.
func (s *Service) RunTransition(ctx context.Context, t run.Transition) {
	if !t.Run.Assessment {
		return
	}
	var err error
	switch t.To {
	case run.PlannedAndFinished:
		err = s.finish(ctx, t.Run, "")
	case run.Errored, run.Canceled, run.ForceCanceled, run.Discarded:
		msg := t.Run.ErrorMessage
		if msg == "" {
			msg = "the assessment run ended " + string(t.To)
		}
		err = s.finish(ctx, t.Run, msg)
	default:
		return
	}
	if err != nil {
		s.o.Logger.Error("recording a health assessment", "run", t.Run.ID, "workspace", t.Run.WorkspaceID, "error", err)
	}
}

// planJSON is what an assessment reads of `terraform show -json` of a
// refresh-only plan.
type planJSON struct {
	ResourceDrift []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
	} `json:"resource_drift"`
	PriorState struct {
		Values struct {
			RootModule module `json:"root_module"`
		} `json:"values"`
	} `json:"prior_state"`
	Checks []struct {
		Status string `json:"status"`
	} `json:"checks"`
}

type module struct {
	Resources []struct {
		Address string `json:"address"`
		Mode    string `json:"mode"`
	} `json:"resources"`
	ChildModules []module `json:"child_modules"`
}

func (m module) managed(into map[string]bool) {
	for _, r := range m.Resources {
		if r.Mode == "managed" {
			into[r.Address] = true
		}
	}
	for _, c := range m.ChildModules {
		c.managed(into)
	}
}

// summarize fills r's drift and check counts from the plan JSON.
func summarize(r *Result, raw []byte) error {
	var p planJSON
	if err := json.Unmarshal(raw, &p); err != nil {
		return fmt.Errorf("reading the plan JSON: %w", err)
	}
	drifted := map[string]bool{}
	for _, d := range p.ResourceDrift {
		if d.Mode == "" || d.Mode == "managed" {
			drifted[d.Address] = true
		}
	}
	known := map[string]bool{}
	p.PriorState.Values.RootModule.managed(known)
	r.DriftedResources = []string{}
	for a := range drifted {
		r.DriftedResources = append(r.DriftedResources, a)
		delete(known, a)
	}
	slices.Sort(r.DriftedResources)
	r.ResourcesDrifted, r.ResourcesUndrifted = len(drifted), len(known)
	r.Drifted = len(drifted) > 0
	for _, c := range p.Checks {
		switch c.Status {
		case "pass":
			r.ChecksPassed++
		case "fail":
			r.ChecksFailed++
		case "error":
			r.ChecksErrored++
		default:
			r.ChecksUnknown++
		}
	}
	return nil
}

// finish records the outcome of an assessment run (errMsg "" when its plan
// finished) and sends the notifications it fires.
func (s *Service) finish(ctx context.Context, rn *run.Run, errMsg string) error {
	res, err := scan(s.o.DB.QueryRow(ctx, `SELECT `+cols+` FROM assessment_results WHERE run_id = ?`, rn.ID))
	if store.IsNoRows(err) {
		return nil // its workspace was deleted meanwhile
	}
	if err != nil {
		return err
	}
	to := Succeeded
	res.ErrorMsg = errMsg
	if errMsg == "" {
		raw, err := s.o.Runs.PlanBlob(ctx, rn.Plan.ID, "json")
		if err == nil {
			err = summarize(res, raw)
		}
		if err != nil {
			to, res.ErrorMsg = Errored, "reading the assessment's plan: "+err.Error()
		}
	} else {
		to = Errored
	}
	if !allowed(res.Status, to) {
		return nil // recorded already (an observer called twice)
	}
	res.Status, res.Succeeded, res.UpdatedAt = to, to == Succeeded, core.Now()
	var prior *Result
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		n, err := tx.Exec(ctx, `UPDATE assessment_results SET status = ?, drifted = ?, succeeded = ?, error_msg = ?, resources_drifted = ?, resources_undrifted = ?,
			checks_passed = ?, checks_failed = ?, checks_errored = ?, checks_unknown = ?, drifted_resources = ?, updated_at = ? WHERE id = ? AND status = ?`,
			string(res.Status), res.Drifted, res.Succeeded, res.ErrorMsg, res.ResourcesDrifted, res.ResourcesUndrifted,
			res.ChecksPassed, res.ChecksFailed, res.ChecksErrored, res.ChecksUnknown, jsonText(res.DriftedResources), core.Micros(res.UpdatedAt),
			res.ID, string(Queued))
		if err != nil {
			return err
		}
		if k, _ := n.RowsAffected(); k == 0 {
			res = nil // another observer recorded it
			return nil
		}
		prior, err = s.latestFinished(ctx, tx, res.WorkspaceID, res.ID)
		return err
	})
	if err != nil || res == nil {
		return err
	}
	select {
	case s.finished <- res.ID:
	default:
	}
	return s.notify(ctx, res, prior)
}

// fires says which triggers a result fires given the one before it: a
// failure after a success (or first), drift that is new or changed, check
// failures that are new or changed. An unchanged state sends nothing, so a
// workspace that stays drifted is not announced every interval.
func fires(res, prior *Result) []notify.Trigger {
	var out []notify.Trigger
	if !res.Succeeded {
		if prior == nil || prior.Succeeded {
			out = append(out, notify.AssessmentFailed)
		}
		return out
	}
	if res.Drifted && (prior == nil || !prior.Drifted || !slices.Equal(prior.DriftedResources, res.DriftedResources)) {
		out = append(out, notify.AssessmentDrifted)
	}
	if res.ChecksFailed > 0 && (prior == nil || prior.ChecksFailed != res.ChecksFailed) {
		out = append(out, notify.AssessmentCheck)
	}
	return out
}

func (s *Service) notify(ctx context.Context, res, prior *Result) error {
	trigs := fires(res, prior)
	if len(trigs) == 0 {
		return nil
	}
	w, err := s.o.Workspaces.System(ctx, res.WorkspaceID)
	if err != nil {
		return err
	}
	e := notify.AssessmentEvent{WorkspaceID: w.ID, ProjectID: w.ProjectID, WorkspaceName: w.Name, Organization: w.Organization, New: forNotify(res)}
	if prior != nil {
		p := forNotify(prior)
		e.Prior = &p
	}
	for _, t := range trigs {
		e.Trigger = t
		if err := s.o.Notify.Assessment(ctx, e); err != nil {
			return fmt.Errorf("queueing %s: %w", t, err)
		}
	}
	return nil
}

func forNotify(r *Result) notify.AssessmentResult {
	return notify.AssessmentResult{ID: r.ID, Succeeded: r.Succeeded, Drifted: r.Drifted,
		AllChecksSucceeded: r.ChecksFailed == 0 && r.ChecksErrored == 0, ResourcesDrifted: r.ResourcesDrifted,
		ResourcesUndrifted: r.ResourcesUndrifted, ChecksPassed: r.ChecksPassed, ChecksFailed: r.ChecksFailed,
		ChecksErrored: r.ChecksErrored, ChecksUnknown: r.ChecksUnknown, CreatedAt: r.CreatedAt}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
