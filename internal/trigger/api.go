package trigger

import (
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the run trigger endpoints of the TFE API v2.
type API struct {
	Service *Service
	// IncludeWorkspace renders a workspace for include=workspace,sourceable.
	IncludeWorkspace func(r *http.Request, id string) (any, error)
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/workspaces/{id}/run-triggers", a.list)
	mux.HandleFunc("POST /api/v2/workspaces/{id}/run-triggers", a.create)
	mux.HandleFunc("GET /api/v2/run-triggers/{id}", a.get)
	mux.HandleFunc("DELETE /api/v2/run-triggers/{id}", a.delete)
	mux.HandleFunc("GET /api/v2/workspaces/{id}/dependencies", a.dependencies)
	mux.HandleFunc("GET /api/v2/workspaces/{id}/dependency-settings", a.settings)
	mux.HandleFunc("PATCH /api/v2/workspaces/{id}/dependency-settings", a.updateSettings)
}

// jsonSettings is a Terrace extension: whether derived dependencies may
// start runs in the workspace.
type jsonSettings struct {
	ID      string `jsonapi:"primary,dependency-settings"`
	Derived bool   `jsonapi:"attr,derived-triggers-enabled"`
}

func (a *API) settings(w http.ResponseWriter, r *http.Request) {
	on, err := a.Service.DerivedTriggers(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, &jsonSettings{ID: r.PathValue("id"), Derived: on})
}

func (a *API) updateSettings(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var b struct {
		Derived *bool `json:"derived-triggers-enabled"`
	}
	if err := doc.Attrs(&b); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if b.Derived == nil {
		tfeapi.Error(w, r, core.Invalid("derived-triggers-enabled is required"))
		return
	}
	if err := a.Service.SetDerivedTriggers(r.Context(), r.PathValue("id"), *b.Derived); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.settings(w, r)
}

// jsonEdge is a Terrace extension: one dependency of a workspace, declared
// (a run trigger) or derived (from state reads), in either direction.
type jsonEdge struct {
	ID           string         `jsonapi:"primary,workspace-dependencies"`
	Kind         string         `jsonapi:"attr,kind"`
	ProducerName string         `jsonapi:"attr,producer-name"`
	ConsumerName string         `jsonapi:"attr,consumer-name"`
	Outputs      []string       `jsonapi:"attr,outputs"`
	Cycle        bool           `jsonapi:"attr,cycle"`
	ReadByRun    string         `jsonapi:"attr,read-by-run,omitempty"`
	UpdatedAt    time.Time      `jsonapi:"attr,updated-at,iso8601"`
	Producer     *jsonWorkspace `jsonapi:"relation,producer"`
	Consumer     *jsonWorkspace `jsonapi:"relation,consumer"`
}

func (a *API) dependencies(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	edges, err := a.Service.Dependencies(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(edges, page)
	out := make([]*jsonEdge, len(items))
	for i, e := range items {
		out[i] = &jsonEdge{ID: e.Kind + ":" + e.ProducerID + ":" + e.ConsumerID, Kind: e.Kind, ProducerName: e.ProducerName,
			ConsumerName: e.ConsumerName, Outputs: e.Outputs, Cycle: e.Cycle, ReadByRun: e.RunID, UpdatedAt: e.UpdatedAt,
			Producer: &jsonWorkspace{ID: e.ProducerID}, Consumer: &jsonWorkspace{ID: e.ConsumerID}}
	}
	tfeapi.RespondList(w, r, out, pg)
}

type jsonTrigger struct {
	ID             string          `jsonapi:"primary,run-triggers"`
	CreatedAt      time.Time       `jsonapi:"attr,created-at,iso8601"`
	SourceableName string          `jsonapi:"attr,sourceable-name"`
	WorkspaceName  string          `jsonapi:"attr,workspace-name"`
	Sourceable     *jsonSourceable `jsonapi:"polyrelation,sourceable"`
	Workspace      *jsonWorkspace  `jsonapi:"relation,workspace"`
}

type jsonSourceable struct {
	Workspace *jsonWorkspace
}

type jsonWorkspace struct {
	ID string `jsonapi:"primary,workspaces"`
}

func toJSON(t *Trigger) *jsonTrigger {
	return &jsonTrigger{ID: t.ID, CreatedAt: t.CreatedAt, SourceableName: t.SourceableName, WorkspaceName: t.WorkspaceName,
		Sourceable: &jsonSourceable{Workspace: &jsonWorkspace{ID: t.SourceableID}}, Workspace: &jsonWorkspace{ID: t.WorkspaceID}}
}

// included renders the workspaces include= asks for, those the caller may
// read: the other end of a trigger can be a workspace the caller may not
// see (its name and ID are the trigger's, as in HCP Terraform; its
// document is not).
func (a *API) included(r *http.Request, ts []*Trigger) ([]any, error) {
	inc, err := tfeapi.Includes(r, "sourceable", "workspace")
	if err != nil || len(inc) == 0 || a.IncludeWorkspace == nil {
		return nil, err
	}
	var out []any
	for _, t := range ts {
		var ids []string
		if inc["sourceable"] {
			ids = append(ids, t.SourceableID)
		}
		if inc["workspace"] {
			ids = append(ids, t.WorkspaceID)
		}
		for _, id := range ids {
			if authorizeRead(r.Context(), t.Organization, id) != nil {
				continue
			}
			w, err := a.IncludeWorkspace(r, id)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
	}
	return out, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	dir := r.URL.Query().Get("filter[run-trigger][type]")
	if dir == "" {
		tfeapi.Error(w, r, core.BadRequest("filter[run-trigger][type] is required: inbound or outbound"))
		return
	}
	ts, err := a.Service.List(r.Context(), r.PathValue("id"), dir)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(ts, page)
	inc, err := a.included(r, items)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonTrigger, len(items))
	for i, t := range items {
		out[i] = toJSON(t)
	}
	tfeapi.RespondList(w, r, out, pg, inc...)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	source, err := doc.RelID("sourceable")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, toJSON)(a.Service.Create(r.Context(), r.PathValue("id"), source))
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := a.included(r, []*Trigger{t})
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, toJSON(t), inc...)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}
