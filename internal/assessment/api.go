package assessment

import (
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves assessment results: HCP Terraform's GET
// /assessment-results/:id, and two Terrace extensions: a workspace's
// results, and starting an assessment now.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/assessment-results/{id}", tfeapi.Handle(a.get))
	mux.HandleFunc("GET /api/v2/workspaces/{id}/assessment-results", tfeapi.Handle(a.list))
	mux.HandleFunc("POST /api/v2/workspaces/{id}/actions/assess", tfeapi.Handle(a.start))
}

// jsonResult is an assessment-results resource: HCP Terraform's drifted,
// succeeded, error-msg and created-at, plus Terrace's status, counts,
// drifted resource addresses and when it was last updated.
type jsonResult struct {
	ID                 string         `jsonapi:"primary,assessment-results"`
	Drifted            bool           `jsonapi:"attr,drifted"`
	Succeeded          bool           `jsonapi:"attr,succeeded"`
	ErrorMsg           *string        `jsonapi:"attr,error-msg"`
	CreatedAt          time.Time      `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt          time.Time      `jsonapi:"attr,updated-at,iso8601"`
	Status             string         `jsonapi:"attr,status"`
	ResourcesDrifted   int            `jsonapi:"attr,resources-drifted"`
	ResourcesUndrifted int            `jsonapi:"attr,resources-undrifted"`
	DriftedResources   []string       `jsonapi:"attr,drifted-resources"`
	ChecksPassed       int            `jsonapi:"attr,checks-passed"`
	ChecksFailed       int            `jsonapi:"attr,checks-failed"`
	ChecksErrored      int            `jsonapi:"attr,checks-errored"`
	ChecksUnknown      int            `jsonapi:"attr,checks-unknown"`
	Workspace          *jsonWorkspace `jsonapi:"relation,workspace"`
}

type jsonWorkspace struct {
	ID string `jsonapi:"primary,workspaces"`
}

func render(r *Result) *jsonResult {
	j := &jsonResult{ID: r.ID, Drifted: r.Drifted, Succeeded: r.Succeeded, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Status: string(r.Status), ResourcesDrifted: r.ResourcesDrifted, ResourcesUndrifted: r.ResourcesUndrifted,
		DriftedResources: r.DriftedResources, ChecksPassed: r.ChecksPassed, ChecksFailed: r.ChecksFailed,
		ChecksErrored: r.ChecksErrored, ChecksUnknown: r.ChecksUnknown, Workspace: &jsonWorkspace{ID: r.WorkspaceID}}
	if r.ErrorMsg != "" {
		j.ErrorMsg = &r.ErrorMsg
	}
	return j
}

func (a *API) get(w http.ResponseWriter, r *http.Request) error {
	res, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, render(res))
	return nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.StorePage(w, r, func(offset, limit int) ([]*Result, int, error) {
		return a.Service.List(r.Context(), r.PathValue("id"), offset, limit)
	}, render)
}

func (a *API) start(w http.ResponseWriter, r *http.Request) error {
	res, err := a.Service.Start(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusAccepted, render(res))
	return nil
}
