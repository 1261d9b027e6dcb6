package ui

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/moduletest"
	"github.com/terracehq/terrace/internal/nocode"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/registry"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/workspace"
)

type moduleRow struct {
	M *registry.Module
	// NoCode is the no-code module's ID ("" when it has none).
	NoCode string
	// Test is the module's newest test run (nil: none).
	Test *moduletest.TestRun
}

// modules lists the organization's private registry, with a provision
// link for no-code modules to those who may provision in some project.
func (u *UI) modules(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	mods, err := u.o.Registry.List(ctx, org, registry.ListOptions{Search: r.URL.Query().Get("search")})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	ids := make([]string, len(mods))
	for i, m := range mods {
		ids[i] = m.ID
	}
	nc, err := u.o.NoCode.NoCodeModuleIDs(ctx, ids)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	tests := map[string]*moduletest.TestRun{}
	if u.o.ModuleTests != nil {
		if tests, err = u.o.ModuleTests.Latest(ctx, ids); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	var rows []moduleRow
	for _, m := range mods {
		row := moduleRow{M: m, Test: tests[m.ID]}
		if l := nc[m.ID]; len(l) > 0 {
			row.NoCode = l[0]
		}
		rows = append(rows, row)
	}
	var provision bool
	if len(nc) > 0 {
		if provision, err = u.mayProvision(ctx, org); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	u.render(w, r, http.StatusOK, "modules", "Private registry", org, map[string]any{"Rows": rows, "Search": r.URL.Query().Get("search"), "Provision": provision})
}

// provisionProjects are organization org's projects in which the caller
// may provision a no-code module's workspace (the check provision asks),
// and the one the form shows chosen (see projectChoices).
func (u *UI) provisionProjects(ctx context.Context, org, chosen string) ([]*project.Project, string, error) {
	ps, err := u.o.Projects.List(ctx, org, project.ListOptions{})
	if err != nil {
		return nil, "", err
	}
	in, pick := projectChoices(ctx, org, ps, authz.ProjectProvisionNoCode, chosen)
	return in, pick, nil
}

// field is one variable of the provisioning form.
type field struct {
	nocode.ModuleVariable
	Value string
}

// DefaultText is the module's default for the variable as the form shows
// it (what an empty field gets): a string unquoted, any other value as
// compact JSON; "" for a required or sensitive variable, or a null
// default.
func (f field) DefaultText() string {
	if f.Required || f.Sensitive || len(f.Default) == 0 {
		return ""
	}
	var str string
	if json.Unmarshal(f.Default, &str) == nil {
		return str
	}
	var b bytes.Buffer
	if json.Compact(&b, f.Default) != nil {
		return string(f.Default)
	}
	return b.String()
}

type provisionData struct {
	Module   *nocode.Module
	Version  string
	Fields   []field
	Projects []*project.Project
	Name     string
	Project  string
	Error    string
}

func (u *UI) provisionForm(w http.ResponseWriter, r *http.Request) {
	u.showProvision(w, r, http.StatusOK, "")
}

func (u *UI) showProvision(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	ctx := r.Context()
	org := r.PathValue("org")
	n, version, vars, err := u.o.NoCode.ProvisionForm(ctx, r.PathValue("id"))
	if err == nil && n.Organization != org {
		err = core.NotFound("no-code module %q not found", r.PathValue("id"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := provisionData{Module: n, Version: version, Error: formErr, Name: r.PostFormValue("workspace_name"), Project: r.PostFormValue("project")}
	for _, v := range vars {
		d.Fields = append(d.Fields, field{ModuleVariable: v, Value: r.PostFormValue("var." + v.Name)})
	}
	if d.Projects, d.Project, err = u.provisionProjects(ctx, org, d.Project); err != nil {
		u.fail(w, r, err)
		return
	}
	if len(d.Projects) == 0 {
		u.fail(w, r, core.Forbidden("you may not create workspaces in any project of organization %q", org))
		return
	}
	u.render(w, r, status, "provision", "Provision a workspace", org, d)
}

// provision creates a workspace from the no-code module with the chosen
// values; the module service checks them against the allowed options.
func (u *UI) provision(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	n, _, vars, err := u.o.NoCode.ProvisionForm(ctx, r.PathValue("id"))
	if err == nil && n.Organization != org {
		err = core.NotFound("no-code module %q not found", r.PathValue("id"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// The no-code service decides (ProjectProvisionNoCode in the project
	// chosen, or the organization's default).
	opts := nocode.WorkspaceOptions{Name: strings.TrimSpace(r.PostFormValue("workspace_name")), ProjectID: r.PostFormValue("project")}
	for _, v := range vars {
		val := r.PostFormValue("var." + v.Name)
		if val == "" && !v.Required {
			continue // the module's default
		}
		if len(v.Options) > 0 && !slices.Contains(v.Options, val) {
			u.showProvision(w, r, http.StatusUnprocessableEntity, "choose one of the allowed values for "+v.Name)
			return
		}
		opts.Vars = append(opts.Vars, nocode.Var{Key: v.Name, Value: val, Category: "terraform", HCL: !isStringType(v.Type), Sensitive: v.Sensitive})
	}
	ws, err := u.o.NoCode.CreateWorkspace(ctx, n.ID, opts)
	if err != nil {
		u.failForm(w, r, err, u.showProvision, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/no-code-modules/{id}/workspaces", http.StatusOK, ws.ID, "id", n.ID)
	http.Redirect(w, r, orgPath(org, "workspaces", ws.Name), http.StatusSeeOther)
}

func isStringType(t string) bool { return t == "string" || t == "any" || t == "" }

// upgradable returns the page's workspace and the no-code module it was
// provisioned from, when the caller may apply runs in it (an upgrade
// applies).
func (u *UI) upgradable(r *http.Request) (*workspace.Workspace, string, error) {
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		return nil, "", err
	}
	if err := authz.Allows(r.Context(), authz.RunApply, res); err != nil {
		return nil, "", err
	}
	id, err := u.o.NoCode.WorkspaceModule(r.Context(), ws.ID)
	return ws, id, err
}

// startUpgrade plans the workspace with its no-code module's current
// version (a plan-only run); the upgrade page shows the plan.
func (u *UI) startUpgrade(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, id, err := u.upgradable(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	up, err := u.o.NoCode.InitiateUpgrade(ctx, id, ws.ID, nil)
	if err != nil {
		u.failForm(w, r, err, u.showWorkspace, http.StatusConflict, core.KindInvalid, core.KindConflict, core.KindForbidden)
		return
	}
	if up.RunID == "" {
		u.showWorkspace(w, r, http.StatusOK, up.Message)
		return
	}
	u.record(r, ws.Organization, "POST /api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade", http.StatusOK, up.RunID, "id", id, "ws", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "upgrade", up.RunID), http.StatusSeeOther)
}

// upgrade shows an upgrade's plan and, once it finished, the confirm
// button.
func (u *UI) upgrade(w http.ResponseWriter, r *http.Request) {
	u.showUpgrade(w, r, http.StatusOK, "")
}

func (u *UI) showUpgrade(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	id, err := u.o.NoCode.WorkspaceModule(ctx, ws.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	up, err := u.o.NoCode.ReadUpgrade(ctx, id, ws.ID, r.PathValue("run"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	rn, err := u.o.Runs.Get(ctx, up.RunID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := runData{Run: rn, Path: orgPath(ws.Organization, "workspaces", ws.Name, "runs", rn.ID), Error: formErr}
	var done bool
	if d.PlanLog, d.PlanOffset, done, err = u.readLog(r, rn.Plan.ID); err != nil {
		u.fail(w, r, err)
		return
	}
	d.PlanLive = !done && !rn.Status.Final()
	if raw, err := u.redactedPlan(ctx, rn); err == nil {
		d.Changes = planChanges(raw)
	}
	u.render(w, r, status, "upgrade", "Upgrade "+ws.Name, ws.Organization, map[string]any{
		"R": d, "W": ws, "Upgrade": up,
		"CanConfirm": rn.Status == run.PlannedAndFinished && allowed(ctx, authz.RunApply, res),
	})
}

func (u *UI) confirmUpgrade(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, id, err := u.upgradable(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	runID, err := u.o.NoCode.ConfirmUpgrade(ctx, id, ws.ID, r.PathValue("run"))
	if err != nil {
		u.failForm(w, r, err, u.showUpgrade, http.StatusConflict, core.KindConflict, core.KindInvalid)
		return
	}
	u.record(r, ws.Organization, "POST /api/v2/no-code-modules/{id}/workspaces/{ws}/upgrade/{run}", http.StatusOK, "", "id", id, "ws", ws.ID, "run", r.PathValue("run"))
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "runs", runID), http.StatusSeeOther)
}
