package sshkey

import (
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the SSH key endpoints of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/ssh-keys", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/ssh-keys", a.create)
	mux.HandleFunc("GET /api/v2/ssh-keys/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/ssh-keys/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/ssh-keys/{id}", a.delete)
}

// jsonKey is the wire form (go-tfe's SSHKey). It has no value field, so no
// response can carry one.
type jsonKey struct {
	ID           string      `jsonapi:"primary,ssh-keys"`
	Name         string      `jsonapi:"attr,name"`
	CreatedAt    time.Time   `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt    time.Time   `jsonapi:"attr,updated-at,iso8601"`
	Organization *jsonOrgRef `jsonapi:"relation,organization"`
}

type jsonOrgRef struct {
	Name string `jsonapi:"primary,organizations"`
}

func toJSON(k *Key) *jsonKey {
	return &jsonKey{ID: k.ID, Name: k.Name, CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt,
		Organization: &jsonOrgRef{Name: k.Organization}}
}

// MaxBody bounds a request: a key plus the JSON:API envelope.
const maxBody = MaxValue + 16<<10

func decode(w http.ResponseWriter, r *http.Request) (Options, error) {
	var o Options
	doc, err := tfeapi.Decode(w, r, maxBody)
	if err != nil {
		return o, err
	}
	var b struct {
		Name  *string `json:"name"`
		Value *string `json:"value"`
	}
	if err := doc.Attrs(&b); err != nil {
		return o, err
	}
	return Options{Name: b.Name, Value: b.Value}, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	keys, err := a.Service.List(r.Context(), r.PathValue("org"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(keys, page)
	out := make([]*jsonKey, len(items))
	for i, k := range items {
		out[i] = toJSON(k)
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	o, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, toJSON)(a.Service.Create(r.Context(), r.PathValue("org"), o))
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Get(r.Context(), r.PathValue("id")))
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	// Look the key up first so that an unknown or foreign key is a 404
	// whatever the body holds.
	if _, err := a.Service.Get(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o, err := decode(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Update(r.Context(), r.PathValue("id"), o))
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}
