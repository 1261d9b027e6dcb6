package stack

import (
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// registerRuns adds the deployment run and step routes.
func (a *API) registerRuns(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/stack-deployment-groups/{id}/stack-deployment-runs", handle(a.listGroupRuns))
	mux.HandleFunc("POST /api/v2/stack-deployment-groups/{id}/approve-all-plans", handle(a.approveGroup))
	mux.HandleFunc("POST /api/v2/stack-deployment-groups/{id}/rerun", handle(a.rerunGroup))
	mux.HandleFunc("GET /api/v2/stacks/{id}/stack-deployments/{name}/stack-deployment-runs", handle(a.listDeploymentRuns))
	mux.HandleFunc("GET /api/v2/stack-deployment-runs/{id}", handle(a.getRun))
	mux.HandleFunc("POST /api/v2/stack-deployment-runs/{id}/approve-all-plans", handle(a.approveRun))
	mux.HandleFunc("POST /api/v2/stack-deployment-runs/{id}/cancel", handle(a.cancelRun))
	mux.HandleFunc("GET /api/v2/stack-deployment-runs/{id}/stack-deployment-steps", handle(a.listSteps))
	mux.HandleFunc("GET /api/v2/stack-deployment-steps/{id}", handle(a.getStep))
	mux.HandleFunc("POST /api/v2/stack-deployment-steps/{id}/advance", handle(a.advanceStep))
	mux.HandleFunc("GET /api/v2/stack-deployment-steps/{id}/artifacts", handle(a.stepArtifact))
}

// stepArtifact answers an artifact raw, as go-tfe's Artifacts reads it:
// JSON for the descriptions, text for the logs.
func (a *API) stepArtifact(w http.ResponseWriter, r *http.Request) error {
	name := r.URL.Query().Get("name")
	b, err := a.Service.StepArtifact(r.Context(), r.PathValue("id"), name)
	if err != nil {
		return err
	}
	ct := "application/json"
	if strings.HasSuffix(name, "-log") {
		ct = "text/plain; charset=utf-8"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(b)
	return err
}

type jsonRun struct {
	ID               string               `jsonapi:"primary,stack-deployment-runs"`
	Status           string               `jsonapi:"attr,status"`
	Deployment       string               `jsonapi:"attr,deployment"`
	PlanMode         string               `jsonapi:"attr,plan-mode"`
	StatusTimestamps map[string]time.Time `jsonapi:"attr,status-timestamps"`
	ErrorMessage     string               `jsonapi:"attr,error-message,omitempty"`
	CreatedAt        time.Time            `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt        time.Time            `jsonapi:"attr,updated-at,iso8601"`
	Group            *jsonGroupRef        `jsonapi:"relation,stack-deployment-group,omitempty"`
	Configuration    *jsonStackCfgRef     `jsonapi:"relation,stack-configuration"`
}

type jsonRunRef struct {
	ID string `jsonapi:"primary,stack-deployment-runs"`
}

type jsonStep struct {
	ID                string               `jsonapi:"primary,stack-deployment-steps"`
	Status            string               `jsonapi:"attr,status"`
	OperationType     string               `jsonapi:"attr,operation-type"`
	RequiresStateLock bool                 `jsonapi:"attr,requires-state-lock"`
	Changes           jsonChanges          `jsonapi:"attr,changes"`
	StatusTimestamps  map[string]time.Time `jsonapi:"attr,status-timestamps"`
	CreatedAt         time.Time            `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt         time.Time            `jsonapi:"attr,updated-at,iso8601"`
	Run               *jsonRunRef          `jsonapi:"relation,stack-deployment-run"`
}

type jsonChanges struct {
	Add    int `json:"add"`
	Change int `json:"change"`
	Import int `json:"import"`
	Remove int `json:"remove"`
	Total  int `json:"total"`
}

func runJSON(r *DeploymentRun) *jsonRun {
	j := &jsonRun{ID: r.ID, Status: string(r.Status), Deployment: r.Deployment, PlanMode: r.Mode, StatusTimestamps: r.Timestamps,
		ErrorMessage: r.Error, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, Configuration: &jsonStackCfgRef{ID: r.ConfigurationID}}
	if r.GroupID != "" {
		j.Group = &jsonGroupRef{ID: r.GroupID}
	}
	return j
}

func stepJSON(st *Step) *jsonStep {
	c := st.Changes
	return &jsonStep{ID: st.ID, Status: string(st.Status), OperationType: st.Operation, RequiresStateLock: applies(st.Operation),
		Changes: jsonChanges(c), StatusTimestamps: st.Timestamps,
		CreatedAt: st.CreatedAt, UpdatedAt: st.UpdatedAt, Run: &jsonRunRef{ID: st.RunID}}
}

func (a *API) respondRuns(w http.ResponseWriter, r *http.Request, runs []*DeploymentRun) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	runs, pg := tfeapi.Paginate(runs, page)
	out := make([]*jsonRun, 0, len(runs))
	for _, x := range runs {
		out = append(out, runJSON(x))
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) listGroupRuns(w http.ResponseWriter, r *http.Request) error {
	runs, err := a.Service.ListGroupRuns(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return a.respondRuns(w, r, runs)
}

func (a *API) listDeploymentRuns(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.StorePage(w, r, func(offset, limit int) ([]*DeploymentRun, int, error) {
		return a.Service.ListDeploymentRuns(r.Context(), r.PathValue("id"), r.PathValue("name"), true, offset, limit)
	}, runJSON)
}

func (a *API) getRun(w http.ResponseWriter, r *http.Request) error {
	inc, err := tfeapi.Includes(r, "stack-deployment-group")
	if err != nil {
		return err
	}
	run, err := a.Service.GetRun(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	var included []any
	if inc["stack_deployment_group"] && run.GroupID != "" {
		g, err := a.Service.GetGroup(r.Context(), run.GroupID)
		if err != nil {
			return err
		}
		included = append(included, a.groupJSON(r, g))
	}
	tfeapi.Respond(w, r, http.StatusOK, runJSON(run), included...)
	return nil
}

func (a *API) approveRun(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.Approve(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) approveGroup(w http.ResponseWriter, r *http.Request) error {
	runs, err := a.Service.ListGroupRuns(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	for _, run := range runs {
		if run.Status == RunPreDeployingPendingOperator || run.Status == RunDeployingPendingOperator {
			if err := a.Service.Approve(r.Context(), run.ID); err != nil {
				return err
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rerunGroup reruns the deployments ?deployments=a,b of a group.
func (a *API) rerunGroup(w http.ResponseWriter, r *http.Request) error {
	var names []string
	for _, n := range strings.Split(r.URL.Query().Get("deployments"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	if err := a.Service.Rerun(r.Context(), r.PathValue("id"), names); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) cancelRun(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.Cancel(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listSteps(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	steps, err := a.Service.ListSteps(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	steps, pg := tfeapi.Paginate(steps, page)
	out := make([]*jsonStep, 0, len(steps))
	for _, st := range steps {
		out = append(out, stepJSON(st))
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) getStep(w http.ResponseWriter, r *http.Request) error {
	st, _, err := a.Service.GetStep(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, stepJSON(st))
	return nil
}

// advanceStep approves the plan of a step waiting for an operator.
func (a *API) advanceStep(w http.ResponseWriter, r *http.Request) error {
	st, run, err := a.Service.GetStep(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if st.Status != StepPendingOperator {
		return conflictf("deployment step %s is %s, not waiting for an operator", st.ID, st.Status)
	}
	if err := a.Service.Approve(r.Context(), run.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
