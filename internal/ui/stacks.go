package ui

import (
	"net/http"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/stack"
)

func (u *UI) stacks(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	list, _, err := u.o.Stacks.ListStacks(ctx, org, "", r.URL.Query().Get("search"), "name", 0, 200)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "stacks", "Stacks", org, map[string]any{"Stacks": list})
}

// loadStack finds a stack of the page's organization the caller may read.
func (u *UI) loadStack(r *http.Request, id string) (*stack.Stack, authz.Resource, error) {
	st, err := u.o.Stacks.GetStack(r.Context(), id)
	if err != nil || st.Organization != r.PathValue("org") {
		return nil, authz.Resource{}, core.NotFound("stack %q not found", id)
	}
	res := authz.Resource{Organization: st.Organization, ProjectID: st.ProjectID}
	if err := authz.Allows(r.Context(), authz.StackRead, res); err != nil {
		return nil, res, core.NotFound("stack %q not found", id)
	}
	return st, res, nil
}

type stackDeployment struct {
	D    *stack.DeploymentRecord
	Runs []*stack.DeploymentRun
}

// stackPage shows a stack's deployments and their runs.
func (u *UI) stackPage(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	st, _, err := u.loadStack(r, r.PathValue("id"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	ds, err := u.o.Stacks.ListDeployments(ctx, st.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	recent, err := u.o.Stacks.RecentRuns(ctx, st.ID, 10)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var out []stackDeployment
	for _, d := range ds {
		out = append(out, stackDeployment{D: d, Runs: recent[d.Name]})
	}
	// Speculative plans, of deployments deployed or not, on their own.
	spec, err := u.o.Stacks.ListSpeculativeRuns(ctx, st.ID, 20)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "stack", st.Name, st.Organization, map[string]any{"S": st, "Deployments": out, "Speculative": spec})
}

type stepView struct {
	S *stack.Step
	// N is the step's number as its workspace run's message says it
	// ("plan step 1"): from 1.
	N       int
	RunPath string
}

func (u *UI) stackRun(w http.ResponseWriter, r *http.Request) {
	u.showStackRun(w, r, http.StatusOK, "")
}

func (u *UI) loadStackRun(r *http.Request) (*stack.DeploymentRun, *stack.Stack, authz.Resource, error) {
	dr, err := u.o.Stacks.GetRun(r.Context(), r.PathValue("id"))
	if err != nil {
		return nil, nil, authz.Resource{}, err
	}
	st, res, err := u.loadStack(r, dr.StackID)
	if err != nil {
		return nil, nil, res, core.NotFound("deployment run %q not found", dr.ID)
	}
	return dr, st, res, nil
}

// showStackRun shows a deployment run's steps, with approve and cancel
// for those who may.
func (u *UI) showStackRun(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	ctx := r.Context()
	dr, st, res, err := u.loadStackRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	steps, err := u.o.Stacks.ListSteps(ctx, dr.ID)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	var views []stepView
	for _, s := range steps {
		v := stepView{S: s, N: s.Seq + 1}
		if s.TFERunID != "" {
			if rn, err := u.o.Runs.Get(ctx, s.TFERunID); err == nil {
				if ws, err := u.o.Workspaces.Get(ctx, rn.WorkspaceID); err == nil && allowed(ctx, authz.RunRead, authz.Resource{Organization: ws.Organization, WorkspaceID: ws.ID, RunID: rn.ID}) {
					v.RunPath = orgPath(ws.Organization, "workspaces", ws.Name, "runs", rn.ID)
				}
			}
		}
		views = append(views, v)
	}
	waiting := dr.Status == stack.RunPreDeployingPendingOperator || dr.Status == stack.RunDeployingPendingOperator
	may := allowed(ctx, authz.StackApprove, res)
	u.render(w, r, status, "stackrun", "Deployment run "+dr.ID, st.Organization, map[string]any{
		"R": dr, "S": st, "Steps": views, "Error": formErr,
		"CanApprove": waiting && may,
		"CanCancel":  may && !dr.Status.Final(),
	})
}

func (u *UI) stackRunAction(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	dr, st, res, err := u.loadStackRun(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := authz.Allows(ctx, authz.StackApprove, res); err != nil {
		u.fail(w, r, err)
		return
	}
	switch r.PathValue("action") {
	case "approve":
		err = u.o.Stacks.Approve(ctx, dr.ID)
	case "cancel":
		err = u.o.Stacks.Cancel(ctx, dr.ID)
	default:
		err = core.NotFound("a deployment run can be approved or canceled, not %q", r.PathValue("action"))
	}
	if err != nil {
		u.failForm(w, r, err, u.showStackRun, http.StatusConflict, core.KindConflict, core.KindInvalid)
		return
	}
	u.record(r, st.Organization, stackRunRoutes[r.PathValue("action")], http.StatusNoContent, "", "id", dr.ID)
	http.Redirect(w, r, orgPath(st.Organization, "stack-runs", dr.ID), http.StatusSeeOther)
}

// stackRunRoutes are the API routes of a deployment run's page actions.
var stackRunRoutes = map[string]string{
	"approve": "POST /api/v2/stack-deployment-runs/{id}/approve-all-plans",
	"cancel":  "POST /api/v2/stack-deployment-runs/{id}/cancel",
}
