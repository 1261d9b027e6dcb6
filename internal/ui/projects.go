package ui

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
)

// The organization's projects (HCP Terraform's Projects page): each the
// caller may read, linked to its workspaces; a new project form for those
// the API's create lets (authz.OrgCreateProject), and per project an edit
// form (name, description: ProjectUpdate) and Delete (ProjectDelete), each
// shown only to those the API route lets and asked again by the service.
// The default project is never offered for deletion, and a project that
// still holds workspaces is refused by the service: the refusal shows in
// its row.

// projectForm is what a project form was given, shown again with its
// refusal: the new project form's (ID "") or a project's.
type projectForm struct {
	ID, Name, Description string
	// Edit: the refused form is the project's edit form (else its
	// Delete, when ID is set).
	Edit bool
}

type projectRow struct {
	P    *project.Project
	Link string
	// Update and Delete: the caller may change and delete it.
	Update, Delete bool
}

type projectsData struct {
	Rows   []projectRow
	Search string
	// Create: the caller may create projects.
	Create bool
	// Form is the refused form and Error its refusal ("" when none).
	Form  projectForm
	Error string
}

// projectsPath is the projects page's URL.
func projectsPath(org string) string { return orgPath(org, "projects") }

func (u *UI) projects(w http.ResponseWriter, r *http.Request) {
	u.showProjects(w, r, http.StatusOK, projectForm{}, "")
}

// showProjects renders the projects page; form is the refused form and
// formErr its refusal ("" when none).
func (u *UI) showProjects(w http.ResponseWriter, r *http.Request, status int, form projectForm, formErr string) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	search := r.URL.Query().Get("search")
	ps, err := u.o.Projects.List(ctx, org, project.ListOptions{Query: search})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := projectsData{Search: search, Form: form, Error: formErr,
		Create: allowed(ctx, authz.OrgCreateProject, authz.Resource{Organization: org})}
	for _, p := range ps {
		res := authz.Resource{Organization: org, ProjectID: p.ID}
		if !allowed(ctx, authz.ProjectRead, res) {
			continue
		}
		d.Rows = append(d.Rows, projectRow{P: p, Link: projectWorkspacesPath(org, p.ID),
			Update: allowed(ctx, authz.ProjectUpdate, res),
			Delete: !p.IsDefault && allowed(ctx, authz.ProjectDelete, res)})
	}
	u.render(w, r, status, "projects", "Projects", org, d)
}

// showProjectsWith re-renders the page with form refused (the show of
// refuseAsAPI).
func (u *UI) showProjectsWith(form projectForm) func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	return func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		u.showProjects(w, r, status, form, formErr)
	}
}

// createProject creates a project from the new project form, as the API's
// create does.
func (u *UI) createProject(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgCreateProject, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := projectForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description")}
	p, err := u.o.Projects.Create(ctx, org, project.Options{Name: &form.Name, Description: &form.Description})
	if err != nil {
		u.refuseAsAPI(w, r, err, u.showProjectsWith(form), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/projects", http.StatusCreated, p.ID, "org", org)
	http.Redirect(w, r, projectsPath(org), http.StatusSeeOther)
}

// orgProject returns the page's project ({id}) of the page's organization
// when the caller may read it and do action on it; any other is not
// found, as in the API.
func (u *UI) orgProject(r *http.Request, action authz.Action) (*project.Project, error) {
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	p, err := u.o.Projects.Get(ctx, id)
	if err == nil && p.Organization != org {
		err = core.NotFound("project %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	res := authz.Resource{Organization: org, ProjectID: p.ID}
	if err := authz.Allows(ctx, authz.ProjectRead, res); err != nil {
		return nil, core.NotFound("project %q not found", id)
	}
	return p, authz.Allows(ctx, action, res)
}

// updateProject renames a project or changes its description, as the
// API's update does.
func (u *UI) updateProject(w http.ResponseWriter, r *http.Request) {
	org := r.PathValue("org")
	p, err := u.orgProject(r, authz.ProjectUpdate)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	form := projectForm{ID: p.ID, Edit: true, Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description")}
	if _, err := u.o.Projects.Update(r.Context(), p.ID, project.Options{Name: &form.Name, Description: &form.Description}); err != nil {
		u.refuseAsAPI(w, r, err, u.showProjectsWith(form), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "PATCH /api/v2/projects/{id}", http.StatusOK, "", "id", p.ID)
	http.Redirect(w, r, projectsPath(org), http.StatusSeeOther)
}

// deleteProject deletes a project, as the API's delete does: the service
// refuses the default project and one that still holds workspaces, and
// the page shows why in the project's row.
func (u *UI) deleteProject(w http.ResponseWriter, r *http.Request) {
	org := r.PathValue("org")
	p, err := u.orgProject(r, authz.ProjectDelete)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.o.Projects.Delete(r.Context(), p.ID); err != nil {
		u.refuseAsAPI(w, r, err, u.showProjectsWith(projectForm{ID: p.ID}), core.KindConflict)
		return
	}
	u.record(r, org, "DELETE /api/v2/projects/{id}", http.StatusNoContent, "", "id", p.ID)
	http.Redirect(w, r, projectsPath(org), http.StatusSeeOther)
}

// projectWorkspacesPath is the workspace list filtered to a project: the
// page a project's name links to (the projects page, the audit trail).
func projectWorkspacesPath(org, projectID string) string {
	return orgPath(org, "workspaces") + "?project=" + url.QueryEscape(projectID)
}
