package ui

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/retention"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/variable"
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
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := authz.Allows(ctx, authz.StateRead, res); err != nil {
		u.fail(w, r, err)
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
	Key, Value, Category, Description string
	Sensitive, HCL                    bool
}

func varViews(vs []*variable.Variable) []varView {
	var out []varView
	for _, v := range vs {
		vv := varView{Key: v.Key, Category: string(v.Category), Description: v.Description, Sensitive: v.Sensitive, HCL: v.HCL}
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

// showVariables renders a workspace's variables page; form is what the
// add variable form holds and formErr its refusal (the form is then open).
func (u *UI) showVariables(w http.ResponseWriter, r *http.Request, status int, form varForm, formErr string) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := authz.Allows(ctx, authz.VariableRead, res); err != nil {
		u.fail(w, r, err)
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
	u.render(w, r, status, "variables", "Variables of "+ws.Name, ws.Organization, map[string]any{
		"W": ws, "Vars": varViews(vars), "Varsets": sets, "Grants": gv, "Error": formErr, "Form": form,
		"CanWrite": allowed(ctx, authz.VariableWrite, res),
	})
}

func (u *UI) createVariable(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := authz.Allows(ctx, authz.VariableWrite, res); err != nil {
		u.fail(w, r, err)
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

func (u *UI) varsets(w http.ResponseWriter, r *http.Request) {
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
	type setView struct {
		S    *variable.VariableSet
		Vars []varView
	}
	var out []setView
	for _, s := range sets {
		vs, err := u.o.Variables.ListVarsetVariables(ctx, s.ID)
		if err != nil {
			continue // a set the caller may not read the variables of
		}
		out = append(out, setView{S: s, Vars: varViews(vs)})
	}
	u.render(w, r, http.StatusOK, "varsets", "Variable sets", org, map[string]any{"Sets": out})
}

func (u *UI) teams(w http.ResponseWriter, r *http.Request) {
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
	u.render(w, r, http.StatusOK, "teams", "Teams", org, map[string]any{"Teams": ts})
}

// auditTrail shows the organization's audit events to those who manage
// it, newest first (page 1 is the latest), a page at a time, with links
// to the newer and the older page. The API lists oldest first; the page
// asks the store for its own order.
func (u *UI) auditTrail(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	events, pg, err := listPage(r.URL.Query(), func(offset, limit int) ([]*audit.Event, int, error) {
		return u.o.Audit.ListOrganization(ctx, org, audit.Filter{Page: offset/limit + 1, Size: limit, NewestFirst: true})
	})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "audit", "Audit trail", org, map[string]any{"Events": events, "Pager": pg})
}
