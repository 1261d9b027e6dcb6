package authz

import (
	"net/http"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves team-workspaces and team-projects (the TFE team access API).
// The guard has decided each request before it gets here (see Routes).
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/team-workspaces", a.listWorkspaces)
	mux.HandleFunc("POST /api/v2/team-workspaces", a.addWorkspace)
	mux.HandleFunc("GET /api/v2/team-workspaces/{id}", a.getWorkspace)
	mux.HandleFunc("PATCH /api/v2/team-workspaces/{id}", a.updateWorkspace)
	mux.HandleFunc("DELETE /api/v2/team-workspaces/{id}", a.removeWorkspace)
	mux.HandleFunc("GET /api/v2/team-projects", a.listProjects)
	mux.HandleFunc("POST /api/v2/team-projects", a.addProject)
	mux.HandleFunc("GET /api/v2/team-projects/{id}", a.getProject)
	mux.HandleFunc("PATCH /api/v2/team-projects/{id}", a.updateProject)
	mux.HandleFunc("DELETE /api/v2/team-projects/{id}", a.removeProject)
	mux.HandleFunc("GET /api/v2/organizations/{org}/token-ttl-policies", a.listTTL)
	mux.HandleFunc("PATCH /api/v2/organizations/{org}/token-ttl-policies", a.updateTTL)
}

type teamRef struct {
	ID string `jsonapi:"primary,teams"`
}

type workspaceRef struct {
	ID string `jsonapi:"primary,workspaces"`
}

type projectRef struct {
	ID string `jsonapi:"primary,projects"`
}

type jsonTeamWorkspace struct {
	ID               string        `jsonapi:"primary,team-workspaces"`
	Access           string        `jsonapi:"attr,access"`
	Runs             string        `jsonapi:"attr,runs"`
	Variables        string        `jsonapi:"attr,variables"`
	StateVersions    string        `jsonapi:"attr,state-versions"`
	SentinelMocks    string        `jsonapi:"attr,sentinel-mocks"`
	WorkspaceLocking bool          `jsonapi:"attr,workspace-locking"`
	RunTasks         bool          `jsonapi:"attr,run-tasks"`
	PolicyOverrides  bool          `jsonapi:"attr,policy-overrides"`
	Team             *teamRef      `jsonapi:"relation,team"`
	Workspace        *workspaceRef `jsonapi:"relation,workspace"`
}

func teamWorkspaceJSON(g *TeamWorkspace) *jsonTeamWorkspace {
	return &jsonTeamWorkspace{
		ID: g.ID, Access: g.Access, Runs: g.Grant.Runs, Variables: g.Grant.Variables, StateVersions: g.Grant.StateVersions,
		SentinelMocks: g.Grant.SentinelMocks, WorkspaceLocking: g.Grant.WorkspaceLocking, RunTasks: g.Grant.RunTasks,
		PolicyOverrides: g.Grant.PolicyOverrides, Team: &teamRef{ID: g.TeamID}, Workspace: &workspaceRef{ID: g.WorkspaceID},
	}
}

type jsonTeamProject struct {
	ID              string         `jsonapi:"primary,team-projects"`
	Access          string         `jsonapi:"attr,access"`
	ProjectAccess   *ProjectSide   `jsonapi:"attr,project-access"`
	WorkspaceAccess *WorkspaceSide `jsonapi:"attr,workspace-access"`
	Team            *teamRef       `jsonapi:"relation,team"`
	Project         *projectRef    `jsonapi:"relation,project"`
}

func teamProjectJSON(g *TeamProject) *jsonTeamProject {
	grant := g.Grant
	if fixed, ok := projectLevels[g.Access]; ok {
		grant = fixed
	}
	return &jsonTeamProject{ID: g.ID, Access: g.Access, ProjectAccess: &grant.Project, WorkspaceAccess: &grant.Workspace,
		Team: &teamRef{ID: g.TeamID}, Project: &projectRef{ID: g.ProjectID}}
}

func (a *API) listWorkspaces(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	all, err := a.Service.ListTeamWorkspaces(r.Context(), r.URL.Query().Get("filter[workspace][id]"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(all, page)
	out := make([]*jsonTeamWorkspace, len(items))
	for i, g := range items {
		out[i] = teamWorkspaceJSON(g)
	}
	tfeapi.RespondList(w, r, out, pg)
}

// accessAttrs are the attributes of a team-workspaces request.
type accessAttrs struct {
	Access *string `json:"access"`
	WorkspaceGrantOptions
}

func (a *API) addWorkspace(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs accessAttrs
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	teamID, err := doc.RelID("team")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	wsID, err := doc.RelID("workspace")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	switch {
	case attrs.Access == nil || *attrs.Access == "":
		err = core.Invalid("access is required")
	case teamID == "":
		err = core.Invalid("team is required")
	case wsID == "":
		err = core.Invalid("workspace is required")
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	g, err := a.Service.AddTeamWorkspace(r.Context(), teamID, wsID, *attrs.Access, attrs.WorkspaceGrantOptions)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, teamWorkspaceJSON(g))
}

func (a *API) getWorkspace(w http.ResponseWriter, r *http.Request) {
	g, err := a.Service.TeamWorkspace(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, teamWorkspaceJSON(g))
}

func (a *API) updateWorkspace(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs accessAttrs
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	g, err := a.Service.UpdateTeamWorkspace(r.Context(), r.PathValue("id"), attrs.Access, attrs.WorkspaceGrantOptions)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, teamWorkspaceJSON(g))
}

func (a *API) removeWorkspace(w http.ResponseWriter, r *http.Request) {
	if err := a.Service.RemoveTeamWorkspace(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	all, err := a.Service.ListTeamProjects(r.Context(), r.URL.Query().Get("filter[project][id]"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(all, page)
	out := make([]*jsonTeamProject, len(items))
	for i, g := range items {
		out[i] = teamProjectJSON(g)
	}
	tfeapi.RespondList(w, r, out, pg)
}

type projectAttrs struct {
	Access *string `json:"access"`
	ProjectGrantOptions
}

func (a *API) addProject(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs projectAttrs
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	teamID, err := doc.RelID("team")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	prjID, err := doc.RelID("project")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	switch {
	case attrs.Access == nil || *attrs.Access == "":
		err = core.Invalid("access is required")
	case teamID == "":
		err = core.Invalid("team is required")
	case prjID == "":
		err = core.Invalid("project is required")
	}
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	g, err := a.Service.AddTeamProject(r.Context(), teamID, prjID, *attrs.Access, attrs.ProjectGrantOptions)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, teamProjectJSON(g))
}

func (a *API) getProject(w http.ResponseWriter, r *http.Request) {
	g, err := a.Service.TeamProject(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, teamProjectJSON(g))
}

func (a *API) updateProject(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs projectAttrs
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	g, err := a.Service.UpdateTeamProject(r.Context(), r.PathValue("id"), attrs.Access, attrs.ProjectGrantOptions)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, teamProjectJSON(g))
}

func (a *API) removeProject(w http.ResponseWriter, r *http.Request) {
	if err := a.Service.RemoveTeamProject(r.Context(), r.PathValue("id")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
