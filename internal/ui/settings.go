package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/variable"
	"github.com/terracehq/terrace/internal/workspace"
)

// outputView is a state output as a page shows it: a sensitive value is
// never rendered.
type outputView struct {
	Name, Type, Value string
	Sensitive         bool
}

func outputViews(outs []*state.Output) []outputView {
	var v []outputView
	for _, o := range outs {
		ov := outputView{Name: o.Name, Type: o.Type, Sensitive: o.Sensitive}
		if !o.Sensitive {
			var s string
			if json.Unmarshal(o.Value, &s) == nil {
				ov.Value = s
			} else {
				ov.Value = string(o.Value)
			}
		}
		v = append(v, ov)
	}
	return v
}

// states lists a workspace's state versions and its current outputs.
func (u *UI) states(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, res, ok := u.workspaceAllowing(w, r, authz.StateRead)
	if !ok {
		return
	}
	versions, _, err := u.o.States.List(ctx, ws.Organization, ws.Name, 0, 50)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := map[string]any{"W": ws, "Versions": versions, "Retention": u.retentionLine(r, ws.Organization, ws.Settings.DataRetention)}
	if allowed(ctx, authz.StateReadOutputs, res) {
		outs, err := u.o.States.CurrentOutputs(ctx, ws.ID)
		if err != nil && core.KindOf(err) != core.KindNotFound {
			u.fail(w, r, err)
			return
		}
		d["Outputs"] = outputViews(outs)
	}
	u.render(w, r, http.StatusOK, "states", "State of "+ws.Name, ws.Organization, d)
}

// retentionLine says which data retention policy a workspace is under,
// and whose it is ("" when none).
func (u *UI) retentionLine(r *http.Request, org string, own retention.Policy) string {
	whose, p := "this workspace's policy", own
	if p.None() {
		o, err := u.o.Orgs.Get(r.Context(), org)
		if err != nil {
			return ""
		}
		whose, p = "the organization's policy", o.Settings.DataRetention
	}
	switch p.Kind {
	case retention.KindDeleteOlder:
		return fmt.Sprintf("The backing data of state versions older than %d days, but the current one, is deleted (%s).", p.Days, whose)
	case retention.KindDontDelete:
		return fmt.Sprintf("State versions are kept however old (%s).", whose)
	}
	return ""
}

// varView is a variable as a page shows it: sensitive values are
// write-only.
type varView struct {
	ID, Key, Value, Category, Description string
	Sensitive, HCL                        bool
	// Edit is its edit and delete forms (the partial "varedit" of
	// layout.html), for those who may change it (nil for others).
	Edit *varEditView
}

// varEditView is a variable's edit form and delete button: where they
// post, what the edit form holds and, after a refusal, why (it is then
// open).
type varEditView struct {
	Action, DeleteAction, CSRF string
	// Sensitive: the variable is; its value is write-only (the field
	// comes empty, left empty keeps it) and it stays sensitive.
	Sensitive bool
	Form      varForm
	Open      bool
	Error     string
}

// withEdits gives each of vs its edit forms, posting to base/{id} and
// base/{id}/delete; refused is an edit refused (its variable's form open
// with what was typed).
func withEdits(r *http.Request, vs []varView, base string, refused varEdit) []varView {
	csrf := CSRFToken(r.Context())
	for i := range vs {
		v := &vs[i]
		e := &varEditView{Action: base + "/" + v.ID, DeleteAction: base + "/" + v.ID + "/delete", CSRF: csrf, Sensitive: v.Sensitive,
			Form: varForm{Key: v.Key, Value: v.Value, Category: v.Category, Description: v.Description, Sensitive: v.Sensitive, HCL: v.HCL}}
		if refused.ID == v.ID {
			e.Form, e.Open, e.Error = refused.Form, true, refused.Error
		}
		v.Edit = e
	}
	return vs
}

// varEditOf reads the edit form of variable old: the options it sends
// (a sensitive variable's empty value keeps the value, and it stays
// sensitive: the service refuses making it plain) and what the form shows
// again after a refusal (a sensitive value never).
func varEditOf(r *http.Request, old *variable.Variable) (variable.VarOptions, varEdit) {
	key, value, desc := strings.TrimSpace(r.PostFormValue("key")), r.PostFormValue("value"), r.PostFormValue("description")
	cat := variable.Category(r.PostFormValue("category"))
	sensitive, hcl := old.Sensitive || r.PostFormValue("sensitive") == "on", r.PostFormValue("hcl") == "on"
	opts := variable.VarOptions{Key: &key, Description: &desc, Category: &cat, Sensitive: &sensitive, HCL: &hcl}
	if !old.Sensitive || value != "" {
		opts.Value = &value
	}
	edit := varEdit{ID: old.ID, Form: varForm{Key: r.PostFormValue("key"), Category: string(cat), Description: desc, Sensitive: sensitive, HCL: hcl}}
	if !sensitive {
		edit.Form.Value = value
	}
	return opts, edit
}

func varViews(vs []*variable.Variable) []varView {
	var out []varView
	for _, v := range vs {
		vv := varView{ID: v.ID, Key: v.Key, Category: string(v.Category), Description: v.Description, Sensitive: v.Sensitive, HCL: v.HCL}
		if !v.Sensitive {
			vv.Value = v.Value
		}
		out = append(out, vv)
	}
	return out
}

// varForm is what the add variable form was given, shown again after a
// refusal so that nothing typed is lost but a sensitive value: a value
// marked sensitive is write-only and never goes back to the browser.
type varForm struct {
	Key, Value, Category, Description string
	Sensitive, HCL                    bool
}

func (u *UI) variables(w http.ResponseWriter, r *http.Request) {
	u.showVariables(w, r, http.StatusOK, varForm{}, "")
}

// varEdit is a refused edit of a variable: which one, what its form was
// given (a sensitive value never) and why.
type varEdit struct {
	ID, Error string
	Form      varForm
}

// showVariables renders a workspace's variables page; form is what the
// add variable form holds and formErr its refusal (the form is then open).
func (u *UI) showVariables(w http.ResponseWriter, r *http.Request, status int, form varForm, formErr string) {
	u.showVariablesEdit(w, r, status, form, formErr, varEdit{})
}

// showVariablesEdit is showVariables with a refused edit (its variable's
// edit form open, holding what was typed).
func (u *UI) showVariablesEdit(w http.ResponseWriter, r *http.Request, status int, form varForm, formErr string, edit varEdit) {
	ctx := r.Context()
	ws, res, ok := u.workspaceAllowing(w, r, authz.VariableRead)
	if !ok {
		return
	}
	vars, err := u.o.Variables.ListWorkspaceVariables(ctx, ws.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	sets, _, err := u.o.Variables.ListWorkspaceVarsets(ctx, ws.ID, "", 0, -1)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	grants, err := u.o.Authz.ListTeamWorkspaces(ctx, ws.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	teamNames := map[string]string{}
	if ts, err := u.o.Teams.List(ctx, ws.Organization, team.ListOptions{}); err == nil {
		for _, t := range ts {
			teamNames[t.ID] = t.Name
		}
	}
	type grantView struct{ Team, Access string }
	var gv []grantView
	for _, g := range grants {
		gv = append(gv, grantView{Team: teamNames[g.TeamID], Access: g.Access})
	}
	canWrite := allowed(ctx, authz.VariableWrite, res)
	views := varViews(vars)
	if canWrite {
		views = withEdits(r, views, orgPath(ws.Organization, "workspaces", ws.Name, "variables"), edit)
	}
	u.render(w, r, status, "variables", "Variables of "+ws.Name, ws.Organization, map[string]any{
		"W": ws, "Vars": views, "Varsets": sets, "Grants": gv, "Error": formErr, "Form": form, "CanWrite": canWrite,
	})
}

// updateVariable changes a workspace variable, as the API's PATCH does:
// its key, category, description, HCL and sensitivity, and its value. A
// sensitive variable's value is write-only: its field comes empty, and
// left empty the value stays. A sensitive variable stays sensitive (the
// service refuses the change).
func (u *UI) updateVariable(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.VariableWrite)
	if !ok {
		return
	}
	old, err := u.o.Variables.GetWorkspaceVariable(ctx, ws.ID, r.PathValue("var"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	opts, edit := varEditOf(r, old)
	v, err := u.o.Variables.UpdateWorkspaceVariable(ctx, ws.ID, old.ID, opts)
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			edit.Error = formErr
			u.showVariablesEdit(w, r, status, varForm{}, "", edit)
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, "PATCH /api/v2/workspaces/{ws}/vars/{var}", http.StatusOK, "", "ws", ws.ID, "var", v.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "variables"), http.StatusSeeOther)
}

// deleteVariable deletes a workspace variable, as the API's DELETE does.
func (u *UI) deleteVariable(w http.ResponseWriter, r *http.Request) {
	ws, _, ok := u.workspaceAllowing(w, r, authz.VariableWrite)
	if !ok {
		return
	}
	id := r.PathValue("var")
	if err := u.o.Variables.DeleteWorkspaceVariable(r.Context(), ws.ID, id); err != nil {
		u.fail(w, r, err)
		return
	}
	u.record(r, ws.Organization, "DELETE /api/v2/workspaces/{ws}/vars/{var}", http.StatusNoContent, "", "ws", ws.ID, "var", id)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "variables"), http.StatusSeeOther)
}

func (u *UI) createVariable(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, ok := u.workspaceAllowing(w, r, authz.VariableWrite)
	if !ok {
		return
	}
	key, value, desc := strings.TrimSpace(r.PostFormValue("key")), r.PostFormValue("value"), r.PostFormValue("description")
	cat := variable.Category(r.PostFormValue("category"))
	sensitive, hcl := r.PostFormValue("sensitive") == "on", r.PostFormValue("hcl") == "on"
	v, err := u.o.Variables.CreateWorkspaceVariable(ctx, ws.ID, variable.VarOptions{Key: &key, Value: &value, Description: &desc, Category: &cat, Sensitive: &sensitive, HCL: &hcl})
	if err != nil {
		form := varForm{Key: r.PostFormValue("key"), Category: string(cat), Description: desc, Sensitive: sensitive, HCL: hcl}
		if !sensitive {
			form.Value = value
		}
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showVariables(w, r, status, form, formErr)
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, "POST /api/v2/workspaces/{ws}/vars", http.StatusCreated, v.ID, "ws", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "variables"), http.StatusSeeOther)
}

// The organization's variable sets (HCP Terraform's Variable sets page):
// each set the caller may read with its variables (a sensitive value is
// write-only: never shown) and the workspaces and projects it applies to.
// Those who manage variable sets (authz.OrgManageVarsets, which the
// variable service asks on every change the API's varsets routes make)
// get the forms: a new set; per set, add and delete a variable, apply it
// to a workspace or a project they can see and remove it, delete it.

// varsetForm is what the new variable set form was given.
type varsetForm struct {
	Name, Description string
	Global, Priority  bool
}

// varsetTarget is a workspace or a project a variable set applies to, or may.
type varsetTarget struct{ ID, Name string }

type varsetView struct {
	S    *variable.VariableSet
	Vars []varView
	// Workspaces and Projects are those it applies to that the caller
	// sees; Unseen counts the others.
	Workspaces, Projects []varsetTarget
	Unseen               int
	// OfferWorkspaces and OfferProjects are those the caller sees that it
	// does not apply to yet (none for a global set, which applies to all).
	OfferWorkspaces, OfferProjects []varsetTarget
}

// Which form of a variable set was refused.
const (
	setFormVariable = "variable" // add variable
	setFormApply    = "apply"    // apply or remove
	setFormDelete   = "delete"   // delete the set or a variable
	setFormEdit     = "edit"     // edit a variable
	setFormSettings = "settings" // the set's name, description, scope
)

type varsetsData struct {
	Sets []varsetView
	// Manage: the caller may create and change variable sets.
	Manage bool
	// Form is what the new set form was given, Error its refusal.
	Form  varsetForm
	Error string
	// Refused is the ID of the set one of whose forms (SetForm) was
	// refused, SetError why, and Var what its add variable form was given.
	Refused, SetForm, SetError string
	Var                        varForm
	// Settings is what the refused set's settings form was given.
	Settings varsetForm
}

// varsetsRefusal is a refused form of a variable set.
type varsetsRefusal struct {
	Set, Form, Error string
	Var              varForm
	// Edit is a refused edit of one of the set's variables (Form
	// setFormEdit), Settings the set's refused settings (setFormSettings).
	Edit     varEdit
	Settings varsetForm
}

// varsetsPath is the variable sets page's URL.
func varsetsPath(org string) string { return orgPath(org, "variable-sets") }

func (u *UI) varsets(w http.ResponseWriter, r *http.Request) {
	u.showVarsets(w, r, http.StatusOK, varsetForm{}, "", varsetsRefusal{})
}

// showVarsets renders the variable sets page; form and formErr are the
// new set form's and its refusal, refused a set's refused form.
func (u *UI) showVarsets(w http.ResponseWriter, r *http.Request, status int, form varsetForm, formErr string, refused varsetsRefusal) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	sets, _, err := u.o.Variables.ListVarsets(ctx, org, r.URL.Query().Get("search"), 0, -1)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// The workspaces and projects the caller sees, to name those a set
	// applies to and to offer the others.
	wss, err := u.o.Workspaces.List(ctx, org, workspace.ListOptions{Sort: "name"})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var prjs []*project.Project
	if u.o.Projects != nil {
		if prjs, err = u.o.Projects.List(ctx, org, project.ListOptions{}); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	d := varsetsData{Manage: allowed(ctx, authz.OrgManageVarsets, authz.Resource{Organization: org}), Form: form, Error: formErr,
		Refused: refused.Set, SetForm: refused.Form, SetError: refused.Error, Var: refused.Var, Settings: refused.Settings}
	for _, s := range sets {
		vs, err := u.o.Variables.ListVarsetVariables(ctx, s.ID)
		if err != nil {
			continue // a set the caller may not read the variables of
		}
		v := varsetView{S: s, Vars: varViews(vs)}
		if d.Manage {
			var edit varEdit
			if refused.Set == s.ID && refused.Form == setFormEdit {
				edit = refused.Edit
				edit.Error = refused.Error
			}
			v.Vars = withEdits(r, v.Vars, orgPath(org, "variable-sets", s.ID, "variables"), edit)
		}
		applied := map[string]bool{}
		for _, id := range append(append([]string{}, s.WorkspaceIDs...), s.ProjectIDs...) {
			applied[id] = true
		}
		for _, ws := range wss {
			t := varsetTarget{ID: ws.ID, Name: ws.Name}
			if applied[ws.ID] {
				v.Workspaces = append(v.Workspaces, t)
			} else if d.Manage && !s.Global {
				v.OfferWorkspaces = append(v.OfferWorkspaces, t)
			}
		}
		for _, p := range prjs {
			t := varsetTarget{ID: p.ID, Name: p.Name}
			if applied[p.ID] {
				v.Projects = append(v.Projects, t)
			} else if d.Manage && !s.Global {
				v.OfferProjects = append(v.OfferProjects, t)
			}
		}
		v.Unseen = len(applied) - len(v.Workspaces) - len(v.Projects)
		d.Sets = append(d.Sets, v)
	}
	u.render(w, r, status, "varsets", "Variable sets", org, d)
}

// createVarset creates a variable set from the new set form, as the API's
// create does.
func (u *UI) createVarset(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManageVarsets, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := varsetForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		Global: r.PostFormValue("global") == "on", Priority: r.PostFormValue("priority") == "on"}
	vs, err := u.o.Variables.CreateVarset(ctx, org, variable.CreateVarsetOptions{VarsetOptions: variable.VarsetOptions{
		Name: &form.Name, Description: &form.Description, Global: &form.Global, Priority: &form.Priority}})
	if err != nil {
		u.refuseAsAPI(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showVarsets(w, r, status, form, formErr, varsetsRefusal{})
		}, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/varsets", http.StatusCreated, vs.ID, "org", org)
	http.Redirect(w, r, varsetsPath(org), http.StatusSeeOther)
}

// orgVarset returns the page's variable set ({id}) of the page's
// organization, one the caller may read (any other is not found, as in
// the API), when the caller may manage variable sets.
func (u *UI) orgVarset(r *http.Request) (*variable.VariableSet, error) {
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	vs, err := u.o.Variables.GetVarset(ctx, id)
	if err == nil && vs.Organization != org {
		err = core.NotFound("variable set %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return vs, authz.Allows(ctx, authz.OrgManageVarsets, authz.Resource{Organization: org})
}

// showVarsetRefusal re-renders the page with a set's refused form.
func (u *UI) showVarsetRefusal(refused varsetsRefusal) func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	return func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		refused.Error = formErr
		u.showVarsets(w, r, status, varsetForm{}, "", refused)
	}
}

// createVarsetVariable adds a variable to a set, as the API's create
// does; a refused one is kept in the set's form, but a sensitive value.
func (u *UI) createVarsetVariable(w http.ResponseWriter, r *http.Request) {
	vs, err := u.orgVarset(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	key, value, desc := strings.TrimSpace(r.PostFormValue("key")), r.PostFormValue("value"), r.PostFormValue("description")
	cat := variable.Category(r.PostFormValue("category"))
	sensitive, hcl := r.PostFormValue("sensitive") == "on", r.PostFormValue("hcl") == "on"
	v, err := u.o.Variables.CreateVarsetVariable(r.Context(), vs.ID, variable.VarOptions{Key: &key, Value: &value, Description: &desc, Category: &cat, Sensitive: &sensitive, HCL: &hcl})
	if err != nil {
		form := varForm{Key: r.PostFormValue("key"), Category: string(cat), Description: desc, Sensitive: sensitive, HCL: hcl}
		if !sensitive {
			form.Value = value
		}
		u.refuseAsAPI(w, r, err, u.showVarsetRefusal(varsetsRefusal{Set: vs.ID, Form: setFormVariable, Var: form}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, vs.Organization, "POST /api/v2/varsets/{vs}/relationships/vars", http.StatusCreated, v.ID, "vs", vs.ID)
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// updateVarsetVariable changes a variable of a set, as the API's update
// does (a sensitive value as on a workspace's page: varEditOf).
func (u *UI) updateVarsetVariable(w http.ResponseWriter, r *http.Request) {
	vs, err := u.orgVarset(r)
	var old *variable.Variable
	if err == nil {
		old, err = u.o.Variables.GetVarsetVariable(r.Context(), vs.ID, r.PathValue("var"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	opts, edit := varEditOf(r, old)
	if _, err := u.o.Variables.UpdateVarsetVariable(r.Context(), vs.ID, old.ID, opts); err != nil {
		u.refuseAsAPI(w, r, err, u.showVarsetRefusal(varsetsRefusal{Set: vs.ID, Form: setFormEdit, Edit: edit}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, vs.Organization, "PATCH /api/v2/varsets/{vs}/relationships/vars/{var}", http.StatusOK, "", "vs", vs.ID, "var", old.ID)
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// updateVarset changes a set's name, description and scope (global,
// priority), as the API's update does; the workspaces and projects it
// applies to stay as they are.
func (u *UI) updateVarset(w http.ResponseWriter, r *http.Request) {
	vs, err := u.orgVarset(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	f := varsetForm{Name: strings.TrimSpace(r.PostFormValue("name")), Description: r.PostFormValue("description"),
		Global: r.PostFormValue("global") == "on", Priority: r.PostFormValue("priority") == "on"}
	if _, err := u.o.Variables.UpdateVarset(r.Context(), vs.ID, variable.VarsetOptions{Name: &f.Name, Description: &f.Description, Global: &f.Global, Priority: &f.Priority}, nil); err != nil {
		u.refuseAsAPI(w, r, err, u.showVarsetRefusal(varsetsRefusal{Set: vs.ID, Form: setFormSettings, Settings: f}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, vs.Organization, "PATCH /api/v2/varsets/{vs}", http.StatusOK, "", "vs", vs.ID)
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// deleteVarsetVariable deletes a variable of a set, as the API's delete
// does.
func (u *UI) deleteVarsetVariable(w http.ResponseWriter, r *http.Request) {
	vs, err := u.orgVarset(r)
	if err == nil {
		err = u.o.Variables.DeleteVarsetVariable(r.Context(), vs.ID, r.PathValue("var"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.record(r, vs.Organization, "DELETE /api/v2/varsets/{vs}/relationships/vars/{var}", http.StatusNoContent, "", "vs", vs.ID, "var", r.PathValue("var"))
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// applyVarset applies a set to the workspace or project the form names
// (target), as the API's relationships routes do.
func (u *UI) applyVarset(w http.ResponseWriter, r *http.Request) { u.changeVarsetTargets(w, r, true) }

// unapplyVarset stops applying a set to the workspace or project the
// form names (target).
func (u *UI) unapplyVarset(w http.ResponseWriter, r *http.Request) {
	u.changeVarsetTargets(w, r, false)
}

func (u *UI) changeVarsetTargets(w http.ResponseWriter, r *http.Request, apply bool) {
	vs, err := u.orgVarset(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	ctx, id := r.Context(), r.PostFormValue("target")
	var route string
	switch {
	case core.HasPrefix(id, core.PrefixWorkspace) && apply:
		route, err = "POST /api/v2/varsets/{vs}/relationships/workspaces", u.o.Variables.ApplyToWorkspaces(ctx, vs.ID, []string{id})
	case core.HasPrefix(id, core.PrefixWorkspace):
		route, err = "DELETE /api/v2/varsets/{vs}/relationships/workspaces", u.o.Variables.RemoveFromWorkspaces(ctx, vs.ID, []string{id})
	case core.HasPrefix(id, core.PrefixProject) && apply:
		route, err = "POST /api/v2/varsets/{vs}/relationships/projects", u.o.Variables.ApplyToProjects(ctx, vs.ID, []string{id})
	case core.HasPrefix(id, core.PrefixProject):
		route, err = "DELETE /api/v2/varsets/{vs}/relationships/projects", u.o.Variables.RemoveFromProjects(ctx, vs.ID, []string{id})
	default:
		err = core.Invalid("choose a workspace or a project")
	}
	if err != nil {
		u.refuseAsAPI(w, r, err, u.showVarsetRefusal(varsetsRefusal{Set: vs.ID, Form: setFormApply}), core.KindInvalid, core.KindConflict, core.KindNotFound)
		return
	}
	u.record(r, vs.Organization, route, http.StatusNoContent, "", "vs", vs.ID)
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// deleteVarset deletes a set and its variables, as the API's delete does.
func (u *UI) deleteVarset(w http.ResponseWriter, r *http.Request) {
	vs, err := u.orgVarset(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.o.Variables.DeleteVarset(r.Context(), vs.ID); err != nil {
		u.refuseAsAPI(w, r, err, u.showVarsetRefusal(varsetsRefusal{Set: vs.ID, Form: setFormDelete}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, vs.Organization, "DELETE /api/v2/varsets/{vs}", http.StatusNoContent, "", "vs", vs.ID)
	http.Redirect(w, r, varsetsPath(vs.Organization), http.StatusSeeOther)
}

// The organization's teams (HCP Terraform's Teams page): each team the
// caller sees with its members, visibility and organization access. Those
// who manage teams (authz.OrgManageTeams) get the new team form, offered
// a secret team only when they may make one (TeamMakeSecret) and
// organization access only when they may give it (TeamManageAccess);
// per team, those who manage its members (TeamMembers) add and remove
// them by username, and those who manage it (TeamManage) rename it,
// change its visibility and whether its members manage its token, its
// organization access when they may give it (TeamManageAccess on it), and
// delete it. The owners team is never offered for editing or deletion,
// and the service refuses both.

// teamForm is what the new team form, or a team's edit form, was given.
type teamForm struct {
	Name, Visibility string
	// Access holds the organization permissions ticked, by API name.
	Access map[string]bool
	// MemberTokens: the team's members manage its token (edit form).
	MemberTokens bool
}

// sentTeamForm is the team form as r posted it.
func sentTeamForm(r *http.Request) teamForm {
	form := teamForm{Name: strings.TrimSpace(r.PostFormValue("name")), Visibility: r.PostFormValue("visibility"),
		MemberTokens: r.PostFormValue("member_tokens") == "on", Access: map[string]bool{}}
	for _, c := range accessChoices() {
		if slices.Contains(r.PostForm["access"], c.Name) {
			form.Access[c.Name] = true
		}
	}
	return form
}

// teamFormOf is the edit form as team t fills it.
func teamFormOf(t *team.Team) teamForm {
	form := teamForm{Name: t.Name, Visibility: t.Settings.Visibility, MemberTokens: t.MembersManageTokens(), Access: map[string]bool{}}
	v := reflect.ValueOf(t.Settings.Access)
	for _, c := range accessChoices() {
		form.Access[c.Name] = v.Field(c.field).Bool()
	}
	return form
}

// accessChoice is an organization permission a team may hold: its API
// name, the name in words ("manage vcs settings") and its field of
// team.Access.
type accessChoice struct {
	Name, Label string
	field       int
}

// accessChoices are the organization permissions a team may hold, each
// of team.Access's fields by its API name (read once), so that one added
// there is offered and shown without a change here.
var accessChoices = sync.OnceValue(func() []accessChoice {
	var out []accessChoice
	ty := reflect.TypeFor[team.Access]()
	for i := range ty.NumField() {
		if ty.Field(i).Type.Kind() != reflect.Bool {
			continue
		}
		name, _, _ := strings.Cut(ty.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = ty.Field(i).Name
		}
		out = append(out, accessChoice{Name: name, Label: strings.ReplaceAll(name, "-", " "), field: i})
	}
	return out
})

// orgAccess lists the organization permissions a team holds, each named
// in words (accessChoice.Label).
func orgAccess(a team.Access) []string {
	var out []string
	v := reflect.ValueOf(a)
	for _, c := range accessChoices() {
		if v.Field(c.field).Bool() {
			out = append(out, c.Label)
		}
	}
	return out
}

// accessOptions are the organization permissions ticked as the service
// takes them (team.AccessOptions has the API's names); nil when none is.
// every: each permission is sent, those not ticked as false (an edit,
// which takes away what is no longer ticked).
func accessOptions(ticked map[string]bool, every bool) (*team.AccessOptions, error) {
	if len(ticked) == 0 && !every {
		return nil, nil
	}
	if every {
		all := map[string]bool{}
		for _, c := range accessChoices() {
			all[c.Name] = ticked[c.Name]
		}
		ticked = all
	}
	b, err := json.Marshal(ticked)
	if err != nil {
		return nil, err
	}
	var o team.AccessOptions
	if err := json.Unmarshal(b, &o); err != nil {
		return nil, err
	}
	return &o, nil
}

type teamRow struct {
	T *team.Team
	// Members are the members' usernames.
	Members []string
	// ManageMembers and Delete: the caller may change its members and
	// delete it; Edit: change its name, visibility and member tokens,
	// EditSecret: make it secret, EditAccess: its organization access.
	ManageMembers, Delete, Edit, EditSecret, EditAccess bool
	// Form fills the edit form: the team's, or what a refused edit sent
	// (EditOpen then).
	Form     teamForm
	EditOpen bool
}

type teamsData struct {
	Teams []teamRow
	// Create: the caller may create teams; Secret: secret ones; Access:
	// with organization access (the Choices).
	Create, Secret, Access bool
	Choices                []accessChoice
	// EditChoices are the permissions a team's edit form offers (to
	// those whose rows say EditAccess).
	EditChoices []accessChoice
	// Form is what the new team form was given, Error its refusal.
	Form  teamForm
	Error string
	// Refused is the ID of the team whose add member, remove member or
	// Delete form was refused, TeamError why, and Username what its add
	// member form was given.
	Refused, TeamError, Username string
}

// teamsRefusal is a team's refused form (Edit: its edit form, as sent).
type teamsRefusal struct {
	Team, Error, Username string
	Edit                  *teamForm
}

// teamsPath is the teams page's URL.
func teamsPath(org string) string { return orgPath(org, "teams") }

func (u *UI) teams(w http.ResponseWriter, r *http.Request) {
	u.showTeams(w, r, http.StatusOK, teamForm{}, "", teamsRefusal{})
}

// showTeams renders the teams page; form and formErr are the new team
// form's and its refusal, refused a team's refused form.
func (u *UI) showTeams(w http.ResponseWriter, r *http.Request, status int, form teamForm, formErr string, refused teamsRefusal) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	ts, err := u.o.Teams.List(ctx, org, team.ListOptions{Query: r.URL.Query().Get("search")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// What the caller may do to each team, decided per team on the
	// caller's standing read once.
	actions := []authz.Action{authz.TeamMembers, authz.TeamManage, authz.TeamManageAccess, authz.TeamMakeSecret}
	decide := make([]func(authz.Team) bool, len(actions))
	for i, a := range actions {
		if decide[i], err = authz.TeamsAllowing(ctx, org, a); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	manageMembers, manage, manageAccess, makeSecret := decide[0], decide[1], decide[2], decide[3]
	res := authz.Resource{Organization: org}
	d := teamsData{Create: allowed(ctx, authz.OrgManageTeams, res), Form: form, Error: formErr,
		Refused: refused.Team, TeamError: refused.Error, Username: refused.Username}
	if d.Create {
		d.Secret = allowed(ctx, authz.TeamMakeSecret, res)
		if d.Access = allowed(ctx, authz.TeamManageAccess, res); d.Access {
			d.Choices = accessChoices()
		}
		if d.Form.Visibility == "" && !d.Secret {
			d.Form.Visibility = "organization"
		}
	}
	d.EditChoices = accessChoices()
	for _, t := range ts {
		users, err := u.o.Teams.Users(ctx, t)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		row := teamRow{T: t, ManageMembers: manageMembers(t.Authz()), Delete: !t.IsOwners() && manage(t.Authz())}
		if row.Edit = row.Delete; row.Edit {
			row.EditSecret, row.EditAccess = makeSecret(t.Authz()), manageAccess(t.Authz())
			row.Form = teamFormOf(t)
			if refused.Team == t.ID && refused.Edit != nil {
				row.Form, row.EditOpen = *refused.Edit, true
			}
		}
		for _, m := range users {
			row.Members = append(row.Members, m.Username)
		}
		d.Teams = append(d.Teams, row)
	}
	u.render(w, r, status, "teams", "Teams", org, d)
}

// createTeam creates a team from the new team form, as the API's create
// does.
func (u *UI) createTeam(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManageTeams, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := sentTeamForm(r)
	opts := team.Options{Name: &form.Name}
	if form.Visibility != "" {
		opts.Visibility = &form.Visibility
	}
	access, err := accessOptions(form.Access, false)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	opts.OrganizationAccess = access
	t, err := u.o.Teams.Create(ctx, org, opts)
	if err != nil {
		u.refuseAsAPI(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showTeams(w, r, status, form, formErr, teamsRefusal{})
		}, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/teams", http.StatusCreated, t.ID, "org", org)
	http.Redirect(w, r, teamsPath(org), http.StatusSeeOther)
}

// orgTeam returns the page's team ({id}) of the page's organization, one
// the caller sees (any other is not found, as in the API), when the
// caller may do action on it.
func (u *UI) orgTeam(r *http.Request, action authz.Action) (*team.Team, error) {
	ctx := r.Context()
	org, id := r.PathValue("org"), r.PathValue("id")
	t, err := u.o.Teams.Get(ctx, id)
	if err == nil && t.Organization != org {
		err = core.NotFound("team %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	return t, authz.AllowsTeam(ctx, action, t.Authz())
}

// showTeamRefusal re-renders the page with a team's refused form.
func (u *UI) showTeamRefusal(refused teamsRefusal) func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	return func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		refused.Error = formErr
		u.showTeams(w, r, status, teamForm{}, "", refused)
	}
}

// updateTeam changes a team from its edit form, as the API's update
// does: its name, visibility and member token management, and its
// organization access when the caller may give it (otherwise the form
// offered none and none is sent, so nothing of it changes).
func (u *UI) updateTeam(w http.ResponseWriter, r *http.Request) {
	t, err := u.orgTeam(r, authz.TeamManage)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	ctx := r.Context()
	form := sentTeamForm(r)
	opts := team.Options{Name: &form.Name, AllowMemberTokenManagement: &form.MemberTokens}
	if form.Visibility != "" {
		opts.Visibility = &form.Visibility
	}
	if !t.IsOwners() && authz.AllowsTeam(ctx, authz.TeamManageAccess, t.Authz()) == nil {
		if opts.OrganizationAccess, err = accessOptions(form.Access, true); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	if _, err := u.o.Teams.Update(ctx, t.ID, opts); err != nil {
		u.refuseAsAPI(w, r, err, u.showTeamRefusal(teamsRefusal{Team: t.ID, Edit: &form}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, t.Organization, "PATCH /api/v2/teams/{id}", http.StatusOK, "", "id", t.ID)
	http.Redirect(w, r, teamsPath(t.Organization), http.StatusSeeOther)
}

// addTeamMember adds a member of the organization to a team by username,
// as the API's team membership route does.
func (u *UI) addTeamMember(w http.ResponseWriter, r *http.Request) { u.changeTeamMembers(w, r, true) }

// removeTeamMember removes a member from a team by username.
func (u *UI) removeTeamMember(w http.ResponseWriter, r *http.Request) {
	u.changeTeamMembers(w, r, false)
}

func (u *UI) changeTeamMembers(w http.ResponseWriter, r *http.Request, add bool) {
	t, err := u.orgTeam(r, authz.TeamMembers)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	ctx, username := r.Context(), strings.TrimSpace(r.PostFormValue("username"))
	route := "POST /api/v2/teams/{id}/relationships/users"
	switch {
	case username == "":
		err = core.Invalid("type the username of a member of the organization")
	case add:
		err = u.o.Teams.AddUsers(ctx, t.ID, []string{username})
	default:
		route = "DELETE /api/v2/teams/{id}/relationships/users"
		err = u.o.Teams.RemoveUsers(ctx, t.ID, []string{username})
	}
	if err != nil {
		refused := teamsRefusal{Team: t.ID}
		if add {
			refused.Username = username
		}
		// An unknown username is a refusal of what was typed: the
		// team was found above.
		u.refuseAsAPI(w, r, err, u.showTeamRefusal(refused), core.KindInvalid, core.KindConflict, core.KindNotFound)
		return
	}
	u.record(r, t.Organization, route, http.StatusNoContent, "", "id", t.ID)
	http.Redirect(w, r, teamsPath(t.Organization), http.StatusSeeOther)
}

// deleteTeam deletes a team, as the API's delete does (the service
// refuses the owners team; the page shows why in its row).
func (u *UI) deleteTeam(w http.ResponseWriter, r *http.Request) {
	t, err := u.orgTeam(r, authz.TeamManage)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.o.Teams.Delete(r.Context(), t.ID); err != nil {
		u.refuseAsAPI(w, r, err, u.showTeamRefusal(teamsRefusal{Team: t.ID}), core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, t.Organization, "DELETE /api/v2/teams/{id}", http.StatusNoContent, "", "id", t.ID)
	http.Redirect(w, r, teamsPath(t.Organization), http.StatusSeeOther)
}
