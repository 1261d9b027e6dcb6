package ui

import (
	"encoding/json"
	"net/http"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/orchestration"
)

type envRow struct {
	Project, ID, Type, Name string
	Latest                  *orchestration.Deployment
}

// environments lists the orchestrator's environments with their latest
// deployment.
func (u *UI) environments(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	objs, err := u.o.Orchestration.List(ctx, org, orchestration.KindEnvironment, "")
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var rows []envRow
	for _, o := range objs {
		var e struct {
			EnvTypeID   string `json:"env_type_id"`
			DisplayName string `json:"display_name"`
		}
		_ = json.Unmarshal(o.Body, &e)
		row := envRow{Project: o.Scope, ID: o.ID, Type: e.EnvTypeID, Name: e.DisplayName}
		ds, err := u.o.Orchestration.ListDeployments(ctx, org, o.Scope, o.ID)
		if k := core.KindOf(err); err != nil && (k == core.KindNotFound || k == core.KindForbidden) {
			// The caller may not read the environment's workspace:
			// the environment is listed without its deployments.
			ds, err = nil, nil
		}
		if err != nil {
			u.fail(w, r, err)
			return
		}
		if len(ds) > 0 {
			row.Latest = ds[0]
		}
		rows = append(rows, row)
	}
	u.render(w, r, http.StatusOK, "environments", "Environments", org, map[string]any{"Rows": rows})
}

// environment shows an environment's deployment history and the graph of
// its latest deployment.
func (u *UI) environment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org, project, env := r.PathValue("org"), r.PathValue("project"), r.PathValue("env")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	if _, err := u.o.Orchestration.Get(ctx, org, orchestration.KindEnvironment, project, env); err != nil {
		u.fail(w, r, err)
		return
	}
	ds, err := u.o.Orchestration.ListDeployments(ctx, org, project, env)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := map[string]any{"Project": project, "Env": env, "Deployments": ds}
	if len(ds) > 0 {
		if g, err := u.o.Orchestration.GetDeploymentGraph(ctx, org, ds[0].ID); err == nil {
			d["Graph"] = layoutGraph(g.Graph)
		}
	}
	u.render(w, r, http.StatusOK, "environment", project+"/"+env, org, d)
}

// deployment shows one deployment: its status, changes and graph.
func (u *UI) deployment(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	dep, err := u.o.Orchestration.GetDeployment(ctx, org, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	g, err := u.o.Orchestration.GetDeploymentGraph(ctx, org, dep.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := map[string]any{"D": dep, "Graph": layoutGraph(g.Graph)}
	if dep.WorkspaceID != "" && dep.RunID != "" {
		res := authz.Resource{Organization: org, WorkspaceID: dep.WorkspaceID, RunID: dep.RunID}
		if ws, err := u.o.Workspaces.Get(ctx, dep.WorkspaceID); err == nil && allowed(ctx, authz.RunRead, res) {
			d["RunPath"] = orgPath(org, "workspaces", ws.Name, "runs", dep.RunID)
		}
	}
	u.render(w, r, http.StatusOK, "deployment", "Deployment "+dep.ID, org, d)
}
