package ui

import (
	"context"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/agent"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/toolversion"
	"github.com/terracehq/terrace/internal/workspace"
)

// registerWorkspaceSettings adds the routes of a workspace's settings pages.
func (u *UI) registerWorkspaceSettings(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/{org}/workspaces/{name}/settings", u.workspaceSettings)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/settings", u.updateWorkspaceSettings)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/settings/project", u.moveWorkspace)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/settings/delete", u.deleteWorkspace)
	mux.HandleFunc("POST /app/{org}/workspaces/{name}/settings/consumers", u.changeConsumers)
}

// Remote state sharing as the settings form offers it: with every
// workspace of the organization (global-remote-state), with the
// workspaces of the workspace's project (project-remote-state), or with
// the workspaces chosen (its remote-state-consumers) only.
const (
	wsShareGlobal   = "global"
	wsShareProject  = "project"
	wsShareSpecific = "specific"
)

// wsSettingsForm is what the general settings form holds: the workspace's
// settings, or what was typed (after a refusal).
type wsSettingsForm struct {
	Name, Description string
	// ExecutionMode is "" for the project's default, else remote, local
	// or agent (with AgentPool).
	ExecutionMode, AgentPool     string
	AutoApply                    bool
	TerraformVersion, WorkingDir string
	// RemoteState is wsShareGlobal, wsShareProject or wsShareSpecific.
	RemoteState string
}

// wsDeleteForm is what the delete form was given.
type wsDeleteForm struct {
	Confirm string
	Force   bool
}

// wsSettingsForms are the settings page's forms as shown after a refusal
// (nil or "": as stored, no refusal).
type wsSettingsForms struct {
	General    *wsSettingsForm
	GeneralErr string
	Move       string
	MoveErr    string
	Delete     wsDeleteForm
	DeleteErr  string
	// Consumer is the workspace name the consumers form was given, and
	// ConsumerErr its refusal.
	Consumer, ConsumerErr string
}

type wsSettingsData struct {
	W *workspace.Workspace
	// Can says which tabs link and which forms may be used (the actions
	// their handlers and the services ask).
	Can map[string]bool
	// Stack is the stack whose deployment the workspace is (nil: none):
	// its settings are then read-only for everyone.
	Stack *crumb
	// Saved: the page follows a successful save.
	Saved bool
	Form  wsSettingsForm
	Error string
	// ProjectMode says what the project's default execution mode is.
	ProjectMode string
	Pools       []*agent.Pool
	// Versions are the terraform versions the workspace may be set to,
	// offered beside the field (which also takes "latest" and
	// constraints); only to those who may change it.
	Versions []*toolversion.Version
	// Consumers are the workspaces the state is shared with by name
	// (remote-state-consumers; those the caller reads).
	Consumers []*workspace.Workspace
	// Consumer is the name the consumers form was given after a refusal,
	// ConsumerErr the refusal.
	Consumer, ConsumerErr string
	// Project is the workspace's project's name; MoveTo the projects it
	// may be moved to, Move the one chosen.
	Project       string
	MoveTo        []*project.Project
	Move, MoveErr string
	Resources     int
	DeleteForm    wsDeleteForm
	DeleteErr     string
}

func (u *UI) workspaceSettings(w http.ResponseWriter, r *http.Request) {
	u.showWorkspaceSettings(w, r, http.StatusOK, wsSettingsForms{})
}

// showWorkspaceSettings renders the settings page of the page's
// workspace, its forms holding forms (after a refusal) or the stored
// settings.
func (u *UI) showWorkspaceSettings(w http.ResponseWriter, r *http.Request, status int, forms wsSettingsForms) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := wsSettingsData{W: ws, Saved: r.URL.Query().Has("saved"), Error: forms.GeneralErr, Move: forms.Move, MoveErr: forms.MoveErr,
		DeleteForm: forms.Delete, DeleteErr: forms.DeleteErr, Form: storedWorkspaceSettings(ws),
		Consumer: forms.Consumer, ConsumerErr: forms.ConsumerErr,
		Can: map[string]bool{
			"state":  allowed(ctx, authz.StateRead, res),
			"vars":   allowed(ctx, authz.VariableRead, res),
			"update": allowed(ctx, authz.WorkspaceUpdate, res),
			"move":   u.o.Projects != nil && allowed(ctx, authz.WorkspaceMove, res),
			// Deleting safely is what the API tells as can-destroy
			// (WorkspaceDelete, workspace.Service.SafeDelete); forcing it
			// (the API's DELETE, which counts no resources) what it tells
			// as can-force-delete (WorkspaceForceDelete: owners, other
			// admins when the organization allows it;
			// workspace.Service.Delete).
			"delete": allowed(ctx, authz.WorkspaceDelete, res),
			"force":  allowed(ctx, authz.WorkspaceForceDelete, res),
		}}
	if forms.General != nil {
		d.Form = *forms.General
	}
	if ws.Settings.ManagedBy != "" {
		d.Stack = &crumb{Name: ws.Settings.ManagedBy}
		if st := u.managingStack(ctx, ws); st != nil {
			d.Stack = &crumb{Name: st.Name, Href: orgPath(ws.Organization, "stacks", st.ID)}
		}
	}
	d.ProjectMode = u.projectExecution(ctx, ws)
	if u.o.AgentPools != nil {
		if d.Pools, err = u.o.AgentPools.List(ctx, ws.Organization); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	if u.o.ToolVersions != nil && d.Can["update"] {
		o, err := u.o.Orgs.Get(ctx, ws.Organization)
		if err == nil {
			d.Versions, err = u.o.ToolVersions.Selectable(ctx, o.AccessBetaTools)
		}
		if err != nil {
			u.fail(w, r, err)
			return
		}
	}
	if d.Consumers, err = u.o.Workspaces.Consumers(ctx, ws.ID); err != nil {
		u.fail(w, r, err)
		return
	}
	if d.Project, d.MoveTo, err = u.workspaceMoveChoices(ctx, ws, d.Can["move"]); err != nil {
		u.fail(w, r, err)
		return
	}
	if u.o.States != nil {
		if d.Resources, err = u.o.States.ResourceCount(ctx, ws.ID); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	u.renderPage(w, r, status, "wssettings", page{Title: "Settings of " + ws.Name, Org: ws.Organization, Data: d,
		Crumbs: []crumb{{Name: ws.Name, Href: orgPath(ws.Organization, "workspaces", ws.Name)}, {Name: "Settings"}}})
}

// storedWorkspaceSettings is the general form holding ws's settings.
func storedWorkspaceSettings(ws *workspace.Workspace) wsSettingsForm {
	s := ws.Settings
	f := wsSettingsForm{Name: ws.Name, Description: s.Description, AutoApply: s.AutoApply,
		TerraformVersion: s.TerraformVersion, WorkingDir: s.WorkingDirectory, RemoteState: wsShareSpecific}
	if s.ExecutionModeOverwrite {
		f.ExecutionMode, f.AgentPool = s.ExecutionMode, s.AgentPoolID
	}
	switch {
	case s.GlobalRemoteState:
		f.RemoteState = wsShareGlobal
	case s.ProjectRemoteState:
		f.RemoteState = wsShareProject
	}
	return f
}

// projectExecution says the execution mode the workspace has when it
// follows its project's (with the agent pool's name when it is one).
func (u *UI) projectExecution(ctx context.Context, ws *workspace.Workspace) string {
	c := *ws
	c.Settings.ExecutionModeOverwrite, c.Settings.AgentPoolOverwrite = false, false
	mode, pool := u.o.Workspaces.EffectiveExecution(ctx, &c)
	if pool == "" {
		return mode
	}
	if u.o.AgentPools != nil {
		if p, err := u.o.AgentPools.Get(ctx, pool); err == nil {
			pool = p.Name
		}
	}
	return mode + ", pool " + pool
}

// workspaceMoveChoices names ws's project and, when the caller may move
// ws out of it (may), lists the projects it may move ws into: those it
// may create workspaces in (workspace.Service.Update asks the same).
func (u *UI) workspaceMoveChoices(ctx context.Context, ws *workspace.Workspace, may bool) (string, []*project.Project, error) {
	if u.o.Projects == nil {
		return ws.ProjectID, nil, nil
	}
	ps, err := u.o.Projects.List(ctx, ws.Organization, project.ListOptions{})
	if err != nil {
		return "", nil, err
	}
	name := ws.ProjectID
	others := make([]*project.Project, 0, len(ps))
	for _, p := range ps {
		if p.ID == ws.ProjectID {
			name = p.Name
		} else {
			others = append(others, p)
		}
	}
	if !may {
		return name, nil, nil
	}
	to, _ := projectChoices(ctx, ws.Organization, others, authz.ProjectCreateWorkspace, "")
	return name, to, nil
}

// postedWorkspaceSettings is the general form as posted.
func postedWorkspaceSettings(r *http.Request) wsSettingsForm {
	return wsSettingsForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		ExecutionMode: r.PostFormValue("execution_mode"), AgentPool: r.PostFormValue("agent_pool_id"),
		AutoApply: r.PostFormValue("apply_method") == "auto", TerraformVersion: strings.TrimSpace(r.PostFormValue("terraform_version")),
		WorkingDir: strings.TrimSpace(r.PostFormValue("working_directory")), RemoteState: r.PostFormValue("remote_state")}
}

// options are the changes the general form asks of the workspace
// service (the API's PATCH attributes).
func (f wsSettingsForm) options() workspace.Options {
	o := workspace.Options{Name: &f.Name, Description: &f.Description, AutoApply: &f.AutoApply,
		TerraformVersion: &f.TerraformVersion, WorkingDirectory: &f.WorkingDir}
	global, prj := f.RemoteState == wsShareGlobal, f.RemoteState == wsShareProject
	o.GlobalRemoteState, o.ProjectRemoteState = &global, &prj
	switch f.ExecutionMode {
	case "":
		// The project's: setting-overwrites off.
		off := false
		o.ExecutionModeOverwrite, o.AgentPoolOverwrite = &off, &off
	case "agent":
		o.ExecutionMode, o.AgentPoolID = &f.ExecutionMode, &f.AgentPool
	default:
		o.ExecutionMode = &f.ExecutionMode
	}
	return o
}

// updateWorkspaceSettings saves the general form, as the API's PATCH
// /api/v2/workspaces/{id} would: the same service decides and refuses. A
// refusal is shown in the form with what was typed; a rename leads to
// the new name's settings page.
func (u *UI) updateWorkspaceSettings(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.WorkspaceUpdate)
	if !ok {
		return
	}
	form := postedWorkspaceSettings(r)
	updated, err := u.o.Workspaces.Update(ctx, ws.ID, form.options())
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showWorkspaceSettings(w, r, status, wsSettingsForms{General: &form, GeneralErr: formErr})
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, "PATCH /api/v2/workspaces/{id}", http.StatusOK, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(updated.Organization, "workspaces", updated.Name, "settings")+"?saved", http.StatusSeeOther)
}

// moveWorkspace moves the workspace to another project, as the API's
// PATCH with nothing but the project does: the move permission on the
// workspace and the right to create workspaces in the destination (the
// service asks both).
func (u *UI) moveWorkspace(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if u.o.Projects == nil {
		u.fail(w, r, core.NotFound("projects are not kept by this server"))
		return
	}
	if err := authz.Allows(ctx, authz.WorkspaceMove, res); err != nil {
		u.fail(w, r, err)
		return
	}
	dest := strings.TrimSpace(r.PostFormValue("project"))
	if dest == "" {
		u.showWorkspaceSettings(w, r, http.StatusUnprocessableEntity, wsSettingsForms{MoveErr: "choose the project to move the workspace to"})
		return
	}
	if _, err := u.o.Workspaces.Update(ctx, ws.ID, workspace.Options{ProjectID: &dest}); err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showWorkspaceSettings(w, r, status, wsSettingsForms{Move: dest, MoveErr: formErr})
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict, core.KindNotFound)
		return
	}
	u.record(r, ws.Organization, "PATCH /api/v2/workspaces/{id}", http.StatusOK, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "settings")+"?saved", http.StatusSeeOther)
}

// deleteWorkspace deletes the workspace once its name is typed: by
// default as the API's safe-delete does (refused while it manages
// resources or is locked), with force as the API's DELETE does, for
// those who may force-delete. Then the workspace list.
func (u *UI) deleteWorkspace(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.WorkspaceDelete)
	if !ok {
		return
	}
	form := wsDeleteForm{Confirm: r.PostFormValue("confirm"), Force: r.PostFormValue("mode") == "force"}
	show := func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		u.showWorkspaceSettings(w, r, status, wsSettingsForms{Delete: form, DeleteErr: formErr})
	}
	if strings.TrimSpace(form.Confirm) != ws.Name {
		show(w, r, http.StatusUnprocessableEntity, "type the workspace's name, "+ws.Name+", to confirm its deletion")
		return
	}
	route, del := "POST /api/v2/workspaces/{id}/actions/safe-delete", u.o.Workspaces.SafeDelete
	if form.Force {
		route, del = "DELETE /api/v2/workspaces/{id}", u.o.Workspaces.Delete
	}
	if err := del(ctx, ws.ID); err != nil {
		u.failForm(w, r, err, show, http.StatusConflict, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, route, http.StatusNoContent, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces"), http.StatusSeeOther)
}

// changeConsumers adds the workspace named (op "add") to those the state
// is shared with, or removes the one whose ID is given (op "remove"), as
// the API's POST and DELETE .../relationships/remote-state-consumers do
// (the same service decides). A refusal is shown beside the form.
func (u *UI) changeConsumers(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.WorkspaceUpdate)
	if !ok {
		return
	}
	name := strings.TrimSpace(r.PostFormValue("workspace"))
	show := func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		u.showWorkspaceSettings(w, r, status, wsSettingsForms{Consumer: name, ConsumerErr: formErr})
	}
	op, id, method := r.PostFormValue("op"), r.PostFormValue("id"), "DELETE"
	switch op {
	case "add":
		method = "POST"
		if name == "" {
			show(w, r, http.StatusUnprocessableEntity, "name the workspace to share the state with")
			return
		}
		c, err := u.o.Workspaces.GetByName(ctx, ws.Organization, name)
		if err != nil {
			u.failForm(w, r, err, show, http.StatusUnprocessableEntity, core.KindNotFound)
			return
		}
		id = c.ID
	case "remove":
	default:
		show(w, r, http.StatusUnprocessableEntity, "unknown change to the state's consumers: "+op)
		return
	}
	if err := u.o.Workspaces.ChangeConsumers(ctx, ws.ID, op, []string{id}); err != nil {
		u.failForm(w, r, err, show, http.StatusUnprocessableEntity, core.KindInvalid, core.KindNotFound)
		return
	}
	u.record(r, ws.Organization, method+" /api/v2/workspaces/{id}/relationships/remote-state-consumers", http.StatusNoContent, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "settings")+"#consumers", http.StatusSeeOther)
}
