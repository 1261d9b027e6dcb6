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
	mux.HandleFunc("GET /api/v2/team-workspaces", tfeapi.Handle(a.listWorkspaces))
	mux.HandleFunc("POST /api/v2/team-workspaces", tfeapi.Handle(a.addWorkspace))
	mux.HandleFunc("GET /api/v2/team-workspaces/{id}", tfeapi.Handle(a.getWorkspace))
	mux.HandleFunc("PATCH /api/v2/team-workspaces/{id}", tfeapi.Handle(a.updateWorkspace))
	mux.HandleFunc("DELETE /api/v2/team-workspaces/{id}", tfeapi.Handle(a.removeWorkspace))
	mux.HandleFunc("GET /api/v2/team-projects", tfeapi.Handle(a.listProjects))
	mux.HandleFunc("POST /api/v2/team-projects", tfeapi.Handle(a.addProject))
	mux.HandleFunc("GET /api/v2/team-projects/{id}", tfeapi.Handle(a.getProject))
	mux.HandleFunc("PATCH /api/v2/team-projects/{id}", tfeapi.Handle(a.updateProject))
	mux.HandleFunc("DELETE /api/v2/team-projects/{id}", tfeapi.Handle(a.removeProject))
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

func (a *API) listWorkspaces(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.ListPage(w, r, func() ([]*TeamWorkspace, error) {
		return a.Service.ListTeamWorkspaces(r.Context(), r.URL.Query().Get("filter[workspace][id]"))
	}, teamWorkspaceJSON)
}

// accessAttrs are the attributes of a team-workspaces request.
type accessAttrs struct {
	Access *string `json:"access"`
	WorkspaceGrantOptions
}

// newGrant reads the body of a request that gives a team access to a
// workspace or project: the access level and the team and target
// relationships (target names the relationship: workspace or project).
func newGrant[T any](w http.ResponseWriter, r *http.Request, target string, levelOf func(*T) *string) (attrs T, access, teamID, targetID string, err error) {
	doc, attrs, err := tfeapi.DecodeAttrs[T](w, r, 0)
	if err != nil {
		return attrs, "", "", "", err
	}
	if teamID, err = doc.RelID("team"); err != nil {
		return attrs, "", "", "", err
	}
	if targetID, err = doc.RelID(target); err != nil {
		return attrs, "", "", "", err
	}
	level := levelOf(&attrs)
	switch {
	case level == nil || *level == "":
		return attrs, "", "", "", core.Invalid("access is required")
	case teamID == "":
		return attrs, "", "", "", core.Invalid("team is required")
	case targetID == "":
		return attrs, "", "", "", core.Invalid("%s is required", target)
	}
	return attrs, *level, teamID, targetID, nil
}

func (a *API) addWorkspace(w http.ResponseWriter, r *http.Request) error {
	attrs, access, teamID, wsID, err := newGrant(w, r, "workspace", func(a *accessAttrs) *string { return a.Access })
	if err != nil {
		return err
	}
	g, err := a.Service.AddTeamWorkspace(r.Context(), teamID, wsID, access, attrs.WorkspaceGrantOptions)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, teamWorkspaceJSON(g))
	return nil
}

func (a *API) getWorkspace(w http.ResponseWriter, r *http.Request) error {
	g, err := a.Service.TeamWorkspace(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, teamWorkspaceJSON(g))
	return nil
}

func (a *API) updateWorkspace(w http.ResponseWriter, r *http.Request) error {
	_, attrs, err := tfeapi.DecodeAttrs[accessAttrs](w, r, 0)
	if err != nil {
		return err
	}
	g, err := a.Service.UpdateTeamWorkspace(r.Context(), r.PathValue("id"), attrs.Access, attrs.WorkspaceGrantOptions)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, teamWorkspaceJSON(g))
	return nil
}

func (a *API) removeWorkspace(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.RemoveTeamWorkspace(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) listProjects(w http.ResponseWriter, r *http.Request) error {
	return tfeapi.ListPage(w, r, func() ([]*TeamProject, error) {
		return a.Service.ListTeamProjects(r.Context(), r.URL.Query().Get("filter[project][id]"))
	}, teamProjectJSON)
}

type projectAttrs struct {
	Access *string `json:"access"`
	ProjectGrantOptions
}

func (a *API) addProject(w http.ResponseWriter, r *http.Request) error {
	attrs, access, teamID, prjID, err := newGrant(w, r, "project", func(a *projectAttrs) *string { return a.Access })
	if err != nil {
		return err
	}
	g, err := a.Service.AddTeamProject(r.Context(), teamID, prjID, access, attrs.ProjectGrantOptions)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusCreated, teamProjectJSON(g))
	return nil
}

func (a *API) getProject(w http.ResponseWriter, r *http.Request) error {
	g, err := a.Service.TeamProject(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, teamProjectJSON(g))
	return nil
}

func (a *API) updateProject(w http.ResponseWriter, r *http.Request) error {
	_, attrs, err := tfeapi.DecodeAttrs[projectAttrs](w, r, 0)
	if err != nil {
		return err
	}
	g, err := a.Service.UpdateTeamProject(r.Context(), r.PathValue("id"), attrs.Access, attrs.ProjectGrantOptions)
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, teamProjectJSON(g))
	return nil
}

func (a *API) removeProject(w http.ResponseWriter, r *http.Request) error {
	if err := a.Service.RemoveTeamProject(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
