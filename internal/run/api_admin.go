package run

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// registerAdmin adds Terraform Enterprise's admin/runs routes: the
// SiteAdmin action of internal/authz, a 404 for everyone else.
func (a *API) registerAdmin(api *http.ServeMux) {
	api.HandleFunc("GET /api/v2/admin/runs", tfeapi.Handle(a.adminList))
	api.HandleFunc("POST /api/v2/admin/runs/{id}/actions/force-cancel", tfeapi.Handle(a.adminForceCancel))
}

// jsonAdminRun is the admin API's run (go-tfe's AdminRun).
type jsonAdminRun struct {
	ID               string            `jsonapi:"primary,runs"`
	CreatedAt        string            `jsonapi:"attr,created-at"` // createdAtText
	HasChanges       bool              `jsonapi:"attr,has-changes"`
	Status           string            `jsonapi:"attr,status"`
	StatusTimestamps map[string]string `jsonapi:"attr,status-timestamps"`
	Workspace        *jsonRef          `jsonapi:"relation,workspace"`

	links *jsonapi.Links
}

func (j *jsonAdminRun) JSONAPILinks() *jsonapi.Links { return j.links }

func adminRunJSON(r *Run) *jsonAdminRun {
	return &jsonAdminRun{ID: r.ID, CreatedAt: createdAtText(r.CreatedAt), HasChanges: r.HasChanges, Status: string(r.Status),
		StatusTimestamps: stamps(r.Timestamps), Workspace: &jsonRef{ID: r.WorkspaceID},
		links: &jsonapi.Links{"self": "/api/v2/runs/" + url.PathEscape(r.ID)}}
}

// adminRunIncludes are what ?include= may ask of the admin run list.
var adminRunIncludes = []string{"workspace", "workspace.organization", "workspace.organization.owners"}

// adminTime reads a date filter: RFC 3339, as Terraform Enterprise
// documents them (zero when absent).
func adminTime(q url.Values, name string) (time.Time, error) {
	v := q.Get(name)
	if v == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return time.Time{}, core.BadRequest("%s must be a time in RFC 3339 format, such as 2006-01-02T15:04:05Z, not %q", name, v)
	}
	return t, nil
}

// adminList lists every run of the site, newest first: q searches run IDs,
// workspace and organization names, filter[status] keeps the runs in the
// statuses listed, filter[from] and filter[to] bound their creation.
func (a *API) adminList(w http.ResponseWriter, req *http.Request) error {
	page, err := tfeapi.ParsePage(req)
	if err != nil {
		return err
	}
	inc, err := tfeapi.Includes(req, adminRunIncludes...)
	if err != nil {
		return err
	}
	q := req.URL.Query()
	o := AdminListOptions{Search: q.Get("q"), Offset: page.Offset(), Limit: page.Size}
	if v := q.Get("filter[status]"); v != "" {
		o.Statuses = strings.Split(v, ",")
	}
	if o.From, err = adminTime(q, "filter[from]"); err != nil {
		return err
	}
	if o.To, err = adminTime(q, "filter[to]"); err != nil {
		return err
	}
	runs, total, err := a.Service.AdminListPage(req.Context(), o)
	if err != nil {
		return err
	}
	var included []any
	if (inc["workspace"] || inc["workspace.organization"] || inc["workspace.organization.owners"]) && a.AdminWorkspaces != nil && len(runs) > 0 {
		var ids []string
		seen := map[string]bool{}
		for _, r := range runs {
			if !seen[r.WorkspaceID] {
				seen[r.WorkspaceID] = true
				ids = append(ids, r.WorkspaceID)
			}
		}
		wsInc := map[string]bool{"organization": inc["workspace.organization"], "organization.owners": inc["workspace.organization.owners"]}
		if included, err = a.AdminWorkspaces(req, ids, wsInc); err != nil {
			return err
		}
	}
	out := make([]*jsonAdminRun, len(runs))
	for i, r := range runs {
		out[i] = adminRunJSON(r)
	}
	tfeapi.RespondList(w, req, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}, included...)
	return nil
}

// adminForceCancel force-cancels a run for a site administrator, with an
// optional comment ({"comment": "…"}, as go-tfe sends it), and answers
// with the run as it ended.
func (a *API) adminForceCancel(w http.ResponseWriter, req *http.Request) error {
	doc, err := tfeapi.Decode(w, req, 0)
	if err != nil {
		return err
	}
	var body struct {
		Comment string `json:"comment"`
	}
	if err := doc.Attrs(&body); err != nil {
		return err
	}
	r, err := a.Service.AdminForceCancel(req.Context(), req.PathValue("id"), body.Comment)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, req, http.StatusOK, adminRunJSON(r))
	return nil
}
