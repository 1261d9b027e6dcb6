package workspace

import (
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/tfeapi"
)

// registerAdmin adds Terraform Enterprise's admin/workspaces routes: the
// SiteAdmin action of internal/authz, a 404 for everyone else.
func (a *API) registerAdmin(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/admin/workspaces", tfeapi.Handle(a.adminList))
	mux.HandleFunc("GET /api/v2/admin/workspaces/{id}", tfeapi.Handle(a.adminGet))
	mux.HandleFunc("DELETE /api/v2/admin/workspaces/{id}", tfeapi.Handle(a.adminDelete))
}

// jsonAdminWorkspace is the admin API's workspace (go-tfe's
// AdminWorkspace): its vcs-repo names the repository only (null when
// none).
type jsonAdminWorkspace struct {
	ID           string            `jsonapi:"primary,workspaces"`
	Name         string            `jsonapi:"attr,name"`
	Locked       bool              `jsonapi:"attr,locked"`
	VCSRepo      *jsonAdminVCSRepo `jsonapi:"attr,vcs-repo"`
	Organization *jsonOrgRef       `jsonapi:"relation,organization"`
	CurrentRun   *jsonRunRef       `jsonapi:"relation,current-run"`

	links *jsonapi.Links
}

func (j *jsonAdminWorkspace) JSONAPILinks() *jsonapi.Links { return j.links }

// jsonAdminVCSRepo is go-tfe's AdminVCSRepo.
type jsonAdminVCSRepo struct {
	Identifier string `json:"identifier"`
}

func adminJSON(w *Summary) *jsonAdminWorkspace {
	j := &jsonAdminWorkspace{ID: w.ID, Name: w.Name, Locked: w.Locked, Organization: &jsonOrgRef{Name: w.Organization},
		links: &jsonapi.Links{"self": "/api/v2/organizations/" + url.PathEscape(w.Organization) + "/workspaces/" + url.PathEscape(w.Name)}}
	if w.CurrentRunID != "" {
		j.CurrentRun = &jsonRunRef{ID: w.CurrentRunID}
	}
	if w.VCSIdentifier != "" {
		j.VCSRepo = &jsonAdminVCSRepo{Identifier: w.VCSIdentifier}
	}
	return j
}

// adminIncludes are what ?include= may ask of the admin workspace routes.
var adminIncludes = []string{"organization", "organization.owners", "current_run"}

// adminIncluded renders what inc asks for of the workspaces ws: each
// organization once (as the admin organization document, with its owners
// and theirs, for organization.owners), and each current run.
func (a *API) adminIncluded(r *http.Request, inc map[string]bool, ws []*Summary) ([]any, error) {
	var out []any
	var orgs []string
	for _, w := range ws {
		if !slices.Contains(orgs, w.Organization) {
			orgs = append(orgs, w.Organization)
		}
	}
	switch {
	case inc["organization.owners"] && a.IncludeOrganizationOwners != nil:
		more, err := a.IncludeOrganizationOwners(r, orgs)
		if err != nil {
			return nil, err
		}
		out = append(out, more...)
	case inc["organization"] && a.IncludeOrganization != nil:
		for _, name := range orgs {
			o, err := a.IncludeOrganization(r, name)
			if err != nil {
				return nil, err
			}
			out = append(out, o)
		}
	}
	if inc["current_run"] && a.IncludeRun != nil {
		for _, w := range ws {
			if w.CurrentRunID == "" {
				continue
			}
			run, err := a.IncludeRun(r, w.CurrentRunID)
			if err != nil {
				return nil, err
			}
			out = append(out, run)
		}
	}
	return out, nil
}

// adminList lists every workspace of the site: q searches names and
// organization names, filter[current_run][status] keeps the workspaces
// whose current run has one of the statuses, sort orders by name or by
// the current run's creation.
func (a *API) adminList(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	inc, err := tfeapi.Includes(r, adminIncludes...)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	opts := AdminListOptions{Search: q.Get("q"), Sort: q.Get("sort")}
	if v := q.Get("filter[current_run][status]"); v != "" {
		opts.CurrentRunStatus = strings.Split(v, ",")
	}
	items, total, err := a.Service.AdminListPage(r.Context(), opts, page.Offset(), page.Size)
	if err != nil {
		return err
	}
	included, err := a.adminIncluded(r, inc, items)
	if err != nil {
		return err
	}
	out := make([]*jsonAdminWorkspace, len(items))
	for i, ws := range items {
		out[i] = adminJSON(ws)
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}, included...)
	return nil
}

func (a *API) adminGet(w http.ResponseWriter, r *http.Request) error {
	inc, err := tfeapi.Includes(r, adminIncludes...)
	if err != nil {
		return err
	}
	ws, err := a.Service.AdminGet(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	included, err := a.adminIncluded(r, inc, []*Summary{ws})
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, adminJSON(ws), included...)
	return nil
}

// adminDelete deletes any workspace as the workspace's own DELETE does.
func (a *API) adminDelete(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.AdminDelete(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// AdminIncluded renders the admin documents of the workspaces ids (those
// that exist) and what inc asks of them (the admin workspace routes'
// includes: organization, organization.owners): what the admin run list
// includes for ?include=workspace, workspace.organization and
// workspace.organization.owners.
func (a *API) AdminIncluded(r *http.Request, ids []string, inc map[string]bool) ([]any, error) {
	ws, err := a.Service.AdminSummaries(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ws))
	for _, w := range ws {
		out = append(out, adminJSON(w))
	}
	more, err := a.adminIncluded(r, inc, ws)
	return append(out, more...), err
}
