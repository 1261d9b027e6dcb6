package ui

import (
	"net/http"
	"net/url"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/project"
)

func (u *UI) projects(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	ps, err := u.o.Projects.List(ctx, org, project.ListOptions{Query: r.URL.Query().Get("search")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	type row struct {
		P    *project.Project
		Link string
	}
	var rows []row
	for _, p := range ps {
		if !allowed(ctx, authz.ProjectRead, authz.Resource{Organization: org, ProjectID: p.ID}) {
			continue
		}
		rows = append(rows, row{P: p, Link: orgPath(org, "workspaces") + "?project=" + url.QueryEscape(p.ID)})
	}
	u.render(w, r, http.StatusOK, "projects", "Projects", org, map[string]any{"Rows": rows, "Search": r.URL.Query().Get("search")})
}
