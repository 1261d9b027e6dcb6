package toolversion

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the admin terraform versions API (site admins only).
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/terraform-versions", tfeapi.Handle(a.list))
	mux.HandleFunc("POST /api/v2/admin/terraform-versions", tfeapi.Handle(a.create))
	mux.HandleFunc("GET /api/v2/admin/terraform-versions/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/admin/terraform-versions/{id}", tfeapi.Handle(a.update))
	mux.HandleFunc("DELETE /api/v2/admin/terraform-versions/{id}", a.delete)
}

// jsonVersion is the wire form (go-tfe's AdminTerraformVersion): url and
// sha are the linux/amd64 build's ("" without one), archs every build.
type jsonVersion struct {
	ID               string    `jsonapi:"primary,terraform-versions"`
	Version          string    `jsonapi:"attr,version"`
	URL              string    `jsonapi:"attr,url"`
	Sha              string    `jsonapi:"attr,sha"`
	Official         bool      `jsonapi:"attr,official"`
	Enabled          bool      `jsonapi:"attr,enabled"`
	Beta             bool      `jsonapi:"attr,beta"`
	Deprecated       bool      `jsonapi:"attr,deprecated"`
	DeprecatedReason *string   `jsonapi:"attr,deprecated-reason"`
	Usage            int       `jsonapi:"attr,usage"`
	CreatedAt        time.Time `jsonapi:"attr,created-at,iso8601"`
	Archs            []Arch    `jsonapi:"attr,archs"`
}

func toJSON(v *Version) *jsonVersion {
	archs := v.Archs
	if archs == nil {
		archs = []Arch{}
	}
	return &jsonVersion{ID: v.ID, Version: v.Version, URL: v.URL(), Sha: v.SHA(), Official: v.Official, Enabled: v.Enabled,
		Beta: v.Beta, Deprecated: v.Deprecated, DeprecatedReason: v.DeprecatedReason, Usage: v.Usage, CreatedAt: v.CreatedAt, Archs: archs}
}

// listParams are the query parameters of the list besides the page's.
var listParams = []string{"filter[version]", "search[version]"}

// filterOf reads the list's query: filter[version] (exactly) and
// search[version] (part of it); any other filter or search is a 400,
// rather than a list that silently ignores it.
func filterOf(q url.Values) (Filter, error) {
	for k := range q {
		if (strings.HasPrefix(k, "filter[") || strings.HasPrefix(k, "search[")) && k != listParams[0] && k != listParams[1] {
			return Filter{}, core.BadRequest("unknown parameter %s: the terraform versions list takes %s", k, strings.Join(listParams, " and "))
		}
	}
	return Filter{Version: q.Get("filter[version]"), Search: q.Get("search[version]")}, nil
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	f, err := filterOf(r.URL.Query())
	if err != nil {
		return err
	}
	return tfeapi.StorePage(w, r, func(offset, limit int) ([]*Version, int, error) {
		return a.Service.List(r.Context(), f, offset, limit)
	}, toJSON)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Get(r.Context(), r.PathValue("id")))
}

// decode reads a version's attributes from a request.
func decode(w http.ResponseWriter, r *http.Request) (Options, error) {
	_, b, err := tfeapi.DecodeAttrs[struct {
		Version          *string `json:"version"`
		URL              *string `json:"url"`
		Sha              *string `json:"sha"`
		Official         *bool   `json:"official"`
		Enabled          *bool   `json:"enabled"`
		Beta             *bool   `json:"beta"`
		Deprecated       *bool   `json:"deprecated"`
		DeprecatedReason *string `json:"deprecated-reason"`
		Archs            *[]Arch `json:"archs"`
	}](w, r, 0)
	if err != nil {
		return Options{}, err
	}
	return Options{Version: b.Version, URL: b.URL, SHA: b.Sha, Official: b.Official, Enabled: b.Enabled, Beta: b.Beta,
		Deprecated: b.Deprecated, DeprecatedReason: b.DeprecatedReason, Archs: b.Archs}, nil
}

func (a *API) create(w http.ResponseWriter, r *http.Request) error {
	o, err := decode(w, r)
	if err != nil {
		return err
	}
	tfeapi.Reply(w, r, http.StatusCreated, toJSON)(a.Service.Create(r.Context(), o))
	return nil
}

func (a *API) update(w http.ResponseWriter, r *http.Request) error {
	o, err := decode(w, r)
	if err != nil {
		return err
	}
	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Update(r.Context(), r.PathValue("id"), o))
	return nil
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}
