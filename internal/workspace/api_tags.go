package workspace

import (
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// registerTags adds the organization tag and reserved tag key routes.
func (a *API) registerTags(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/tags", a.orgTags)
	mux.HandleFunc("DELETE /api/v2/organizations/{org}/tags", a.deleteOrgTags)
	mux.HandleFunc("POST /api/v2/tags/{id}/relationships/workspaces", a.tagWorkspaces)
	mux.HandleFunc("GET /api/v2/organizations/{org}/reserved-tag-keys", a.listReserved)
	mux.HandleFunc("POST /api/v2/organizations/{org}/reserved-tag-keys", a.createReserved)
	// HCP Terraform documents /reserved-tags/{id}; go-tfe calls
	// /reserved-tag-keys/{id}.
	mux.HandleFunc("PATCH /api/v2/reserved-tag-keys/{id}", a.updateReserved)
	mux.HandleFunc("DELETE /api/v2/reserved-tag-keys/{id}", a.deleteReserved)
	mux.HandleFunc("PATCH /api/v2/reserved-tags/{id}", a.updateReserved)
	mux.HandleFunc("DELETE /api/v2/reserved-tags/{id}", a.deleteReserved)
}

// resourceIDs reads the IDs of a body's data array of resources of type
// typ (an empty type is accepted, as go-tfe sends some).
func resourceIDs(w http.ResponseWriter, r *http.Request, typ string) ([]string, error) {
	res, err := tfeapi.DecodeResources(w, r)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for _, x := range res {
		if x.Type != "" && x.Type != typ {
			return nil, core.Invalid("data must hold %s, not %q", typ, x.Type)
		}
		if x.ID == "" {
			return nil, core.Invalid("every %s in data needs an id", typ)
		}
		if !seen[x.ID] {
			seen[x.ID] = true
			ids = append(ids, x.ID)
		}
	}
	return ids, nil
}

func (a *API) deleteOrgTags(w http.ResponseWriter, r *http.Request) {
	ids, err := resourceIDs(w, r, "tags")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.NoContent(w, r, a.Service.DeleteOrganizationTags(r.Context(), r.PathValue("org"), ids))
}

func (a *API) tagWorkspaces(w http.ResponseWriter, r *http.Request) {
	// An unknown or foreign tag is a 404 whatever the body holds.
	if _, err := a.Service.TagOrganization(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ids, err := resourceIDs(w, r, "workspaces")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.NoContent(w, r, a.Service.AddTagToWorkspaces(r.Context(), r.PathValue("id"), ids))
}

// jsonReservedTagKey is the wire form. HCP Terraform's documents carry
// created-at and updated-at; go-tfe v1 decodes created_at and updated_at:
// both are sent.
type jsonReservedTagKey struct {
	ID               string    `jsonapi:"primary,reserved-tag-keys"`
	Key              string    `jsonapi:"attr,key"`
	DisableOverrides bool      `jsonapi:"attr,disable-overrides"`
	CreatedAt        time.Time `jsonapi:"attr,created-at,iso8601"`
	UpdatedAt        time.Time `jsonapi:"attr,updated-at,iso8601"`
	CreatedAtGoTFE   time.Time `jsonapi:"attr,created_at,iso8601"`
	UpdatedAtGoTFE   time.Time `jsonapi:"attr,updated_at,iso8601"`
}

func reservedJSON(k *ReservedTagKey) *jsonReservedTagKey {
	return &jsonReservedTagKey{ID: k.ID, Key: k.Key, DisableOverrides: k.DisableOverrides,
		CreatedAt: k.CreatedAt, UpdatedAt: k.UpdatedAt, CreatedAtGoTFE: k.CreatedAt, UpdatedAtGoTFE: k.UpdatedAt}
}

func decodeReserved(w http.ResponseWriter, r *http.Request) (ReservedTagKeyOptions, error) {
	var o ReservedTagKeyOptions
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return o, err
	}
	var b struct {
		Key              *string `json:"key"`
		DisableOverrides *bool   `json:"disable-overrides"`
	}
	if err := doc.Attrs(&b); err != nil {
		return o, err
	}
	return ReservedTagKeyOptions{Key: b.Key, DisableOverrides: b.DisableOverrides}, nil
}

func (a *API) listReserved(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	keys, total, err := a.Service.ReservedTagKeys(r.Context(), r.PathValue("org"), page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*jsonReservedTagKey, len(keys))
	for i, k := range keys {
		out[i] = reservedJSON(k)
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total})
}

func (a *API) createReserved(w http.ResponseWriter, r *http.Request) {
	o, err := decodeReserved(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusCreated, reservedJSON)(a.Service.CreateReservedTagKey(r.Context(), r.PathValue("org"), o))
}

func (a *API) updateReserved(w http.ResponseWriter, r *http.Request) {
	// An unknown or foreign key is a 404 whatever the body holds.
	if _, err := a.Service.ReservedTagKeyOrganization(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	o, err := decodeReserved(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Reply(w, r, http.StatusOK, reservedJSON)(a.Service.UpdateReservedTagKey(r.Context(), r.PathValue("id"), o))
}

func (a *API) deleteReserved(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteReservedTagKey(r.Context(), r.PathValue("id")))
}
