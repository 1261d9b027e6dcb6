package agent

import (
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the agent pool endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/agent-pools", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/agent-pools", a.create)
	mux.HandleFunc("GET /api/v2/agent-pools/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/agent-pools/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/agent-pools/{id}", a.delete)
}

type jsonPool struct {
	ID                 string      `jsonapi:"primary,agent-pools"`
	Name               string      `jsonapi:"attr,name"`
	AgentCount         int         `jsonapi:"attr,agent-count"`
	OrganizationScoped bool        `jsonapi:"attr,organization-scoped"`
	CreatedAt          time.Time   `jsonapi:"attr,created-at,iso8601"`
	Organization       *jsonOrgRef `jsonapi:"relation,organization"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

func toJSON(p *Pool) *jsonPool {
	return &jsonPool{ID: p.ID, Name: p.Name, OrganizationScoped: p.OrganizationScoped, CreatedAt: p.CreatedAt, Organization: &jsonOrgRef{Name: p.Organization}}
}

type body struct {
	Name               *string `json:"name"`
	OrganizationScoped *bool   `json:"organization-scoped"`
}

func decode(w http.ResponseWriter, r *http.Request) (body, error) {
	var b body
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return b, err
	}
	return b, doc.Attrs(&b)
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if _, err := tfeapi.Includes(r, "workspaces"); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ps, err := a.Service.List(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := strings.ToLower(r.URL.Query().Get("q"))
	var kept []*Pool
	for _, p := range ps {
		if q == "" || strings.Contains(strings.ToLower(p.Name), q) {
			kept = append(kept, p)
		}
	}
	items, pg := tfeapi.Paginate(kept, page)
	out := make([]*jsonPool, len(items))
	for i, p := range items {
		out[i] = toJSON(p)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	b, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	name := ""
	if b.Name != nil {
		name = *b.Name
	}
	p, err := a.Service.Create(r.Context(), r.PathValue("org"), name, b.OrganizationScoped)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, toJSON(p))
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	p, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, toJSON(p))
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	b, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p, err := a.Service.Update(r.Context(), r.PathValue("id"), b.Name, b.OrganizationScoped)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, toJSON(p))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	if err := a.Service.Delete(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
