package ui

import (
	"context"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/stack"
	"github.com/terracehq/terrace/internal/vcs"
	"github.com/terracehq/terrace/internal/workspace"
)

// workspaceRow is one line of the workspace list.
type workspaceRow struct {
	W       *workspace.Workspace
	Project string
	Latest  *run.Latest
	// Health is "", "healthy", "drifted" or "errored" (assessments).
	Health string
	// Stack is the stack whose deployment the workspace is (nil for
	// people's workspaces).
	Stack *stack.Stack
}

type workspacesData struct {
	Rows     []workspaceRow
	Projects []*project.Project
	Filter   struct{ Search, Tag, Project, Lock string }
	Create   bool
	// CreateIn are the projects the caller may create a workspace in,
	// the form's choices (the default project first chosen).
	CreateIn []*project.Project
	// Tokens are the OAuth tokens the new workspace form offers for the
	// version control workflow: none when the caller may not read the
	// organization's VCS providers, or it has no token.
	Tokens []tokenChoice
	// Form is what the new workspace form was given (after a refusal).
	Form  workspaceForm
	Error string
	pager
}

// workspaceForm is what the new workspace form was given.
type workspaceForm struct {
	Name, Project string
	AutoApply     bool
	// The version control workflow's: the token's ID ("" for the
	// CLI-driven workflow), the repository's identifier and branch.
	Token, Identifier, Branch string
}

// tokenChoice is an OAuth token as the form offers it.
type tokenChoice struct {
	ID, Label string
}

// workspaces lists an organization's workspaces the caller may read, with
// their lock, latest run and health; filters come from the query string.
func (u *UI) workspaces(w http.ResponseWriter, r *http.Request) {
	u.listWorkspaces(w, r, http.StatusOK, workspaceForm{}, "")
}

func (u *UI) listWorkspaces(w http.ResponseWriter, r *http.Request, status int, form workspaceForm, formErr string) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	var d workspacesData
	d.Filter.Search, d.Filter.Tag, d.Filter.Project, d.Filter.Lock = q.Get("search"), q.Get("tag"), q.Get("project"), q.Get("lock")
	d.Form, d.Error = form, formErr
	opts := workspace.ListOptions{Search: d.Filter.Search, ProjectID: d.Filter.Project, Sort: q.Get("sort")}
	if d.Filter.Tag != "" {
		opts.Tags = strings.Split(d.Filter.Tag, ",")
	}
	switch d.Filter.Lock {
	case "locked":
		opts.Locked = new(true)
	case "unlocked":
		opts.Locked = new(false)
	}
	// One page from the store; a page past the last shows the last.
	shown, pg, err := listPage(q, func(offset, limit int) ([]*workspace.Workspace, int, error) {
		return u.o.Workspaces.ListPage(ctx, org, opts, offset, limit)
	})
	d.pager = pg
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if u.o.Projects != nil {
		if d.Projects, err = u.o.Projects.List(ctx, org, project.ListOptions{}); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	names := map[string]string{}
	for _, p := range d.Projects {
		names[p.ID] = p.Name
	}
	ids := make([]string, len(shown))
	for i, ws := range shown {
		ids[i] = ws.ID
	}
	latest, err := u.o.Runs.LatestByWorkspace(ctx, org, ids)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	for _, ws := range shown {
		row := workspaceRow{W: ws, Project: names[ws.ProjectID]}
		if l, ok := latest[ws.ID]; ok {
			row.Latest = &l
		}
		if ws.Settings.AssessmentsEnabled {
			row.Health = u.health(ctx, ws.ID)
		}
		row.Stack = u.managingStack(ctx, ws)
		d.Rows = append(d.Rows, row)
	}
	d.Create = allowed(ctx, authz.OrgCreateWorkspace, authz.Resource{Organization: org})
	if d.Create {
		d.CreateIn, d.Form.Project = projectChoices(ctx, org, d.Projects, authz.ProjectCreateWorkspace, d.Form.Project)
		if d.Tokens, err = u.tokenChoices(ctx, org); err != nil {
			u.fail(w, r, err)
			return
		}
	}
	u.render(w, r, status, "workspaces", "Workspaces", org, d)
}

// projectChoices are the projects of ps in which the caller may do
// action (the service's own question), and the one a form shows chosen:
// chosen when it is among them, else the default project, else the first.
func projectChoices(ctx context.Context, org string, ps []*project.Project, action authz.Action, chosen string) ([]*project.Project, string) {
	var in []*project.Project
	for _, p := range ps {
		if allowed(ctx, action, authz.Resource{Organization: org, ProjectID: p.ID}) {
			in = append(in, p)
		}
	}
	pick := ""
	for _, p := range in {
		if p.ID == chosen {
			return in, chosen
		}
		if pick == "" || p.IsDefault {
			pick = p.ID
		}
	}
	return in, pick
}

// tokenChoices are the organization's OAuth tokens for the new workspace
// form's version control part, each named by its VCS provider (the
// client's name, else its provider's) and the host's user who authorized
// it. None when this server keeps no VCS providers or the caller may not
// read them (authz.OrgReadVCS: VCS managers and workspace admins, as for
// the API's lists): a member who may only create workspaces gets the
// CLI-driven form, not an error.
func (u *UI) tokenChoices(ctx context.Context, org string) ([]tokenChoice, error) {
	if u.o.VCS == nil || !allowed(ctx, authz.OrgReadVCS, authz.Resource{Organization: org}) {
		return nil, nil
	}
	clients, err := u.o.VCS.ListClients(ctx, org)
	if err != nil {
		return nil, err
	}
	tokens, err := u.o.VCS.ListTokens(ctx, org)
	if err != nil {
		return nil, err
	}
	byID := map[string]*vcs.Client{}
	for _, c := range clients {
		byID[c.ID] = c
	}
	var out []tokenChoice
	for _, t := range tokens {
		c := byID[t.Client]
		if c == nil {
			continue
		}
		provider := c.Provider.DisplayName()
		if provider == "" {
			provider = string(c.Provider)
		}
		label := provider
		if c.Name != nil && *c.Name != "" && *c.Name != provider {
			label = *c.Name + " (" + provider + ")"
		}
		if t.ServiceProviderUser != "" {
			label += ", as " + t.ServiceProviderUser
		}
		if len(c.Tokens) > 1 {
			// A client's tokens apart: each by its ID.
			label += ", token " + t.ID
		}
		out = append(out, tokenChoice{ID: t.ID, Label: label})
	}
	return out, nil
}

// health is the workspace's latest finished assessment, in a word.
func (u *UI) health(ctx context.Context, workspaceID string) string {
	if u.o.Assessments == nil {
		return ""
	}
	id, err := u.o.Assessments.CurrentID(ctx, workspaceID)
	if err != nil || id == "" {
		return ""
	}
	a, err := u.o.Assessments.Get(ctx, id)
	switch {
	case err != nil:
		return ""
	case !a.Succeeded:
		return "errored"
	case a.Drifted:
		return "drifted"
	}
	return "healthy"
}

func (u *UI) createWorkspace(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgCreateWorkspace, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := workspaceForm{Name: strings.TrimSpace(r.PostFormValue("name")), Project: r.PostFormValue("project"),
		AutoApply: r.PostFormValue("auto_apply") == "on", Token: strings.TrimSpace(r.PostFormValue("oauth_token_id")),
		Identifier: strings.TrimSpace(r.PostFormValue("vcs_identifier")), Branch: strings.TrimSpace(r.PostFormValue("vcs_branch"))}
	opts := workspace.Options{Name: &form.Name}
	if form.Project != "" {
		opts.ProjectID = &form.Project
	}
	if form.AutoApply {
		t := true
		opts.AutoApply = &t
	}
	// The version control workflow: the same connection the API's
	// vcs-repo asks for, checked by the same service (the token's
	// organization and scope, then the host: the repository, its default
	// branch and the branch's head). A repository typed without a token
	// is sent too, for the service to refuse, rather than quietly making
	// a CLI-driven workspace.
	if form.Token != "" || form.Identifier != "" || form.Branch != "" {
		opts.VCSRepo = &workspace.VCSRepoOptions{Identifier: formValue(r, "vcs_identifier"),
			OAuthTokenID: formValue(r, "oauth_token_id"), Branch: formValue(r, "vcs_branch")}
	}
	ws, err := u.o.Workspaces.Create(ctx, org, opts)
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.listWorkspaces(w, r, status, form, formErr)
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/workspaces", http.StatusCreated, ws.ID, "org", org)
	http.Redirect(w, r, orgPath(org, "workspaces", ws.Name), http.StatusSeeOther)
}

// loadWorkspace finds the page's workspace; one the caller may not read is
// not found, as in the API.
func (u *UI) loadWorkspace(r *http.Request) (*workspace.Workspace, authz.Resource, error) {
	ctx := r.Context()
	org, name := r.PathValue("org"), r.PathValue("name")
	ws, err := u.o.Workspaces.GetByName(ctx, org, name)
	if err != nil {
		return nil, authz.Resource{}, err
	}
	res := authz.Resource{Organization: ws.Organization, ProjectID: ws.ProjectID, WorkspaceID: ws.ID}
	if err := authz.Allows(ctx, authz.WorkspaceRead, res); err != nil {
		return nil, res, core.NotFound("workspace %q not found in organization %q", name, org)
	}
	return ws, res, nil
}

// managingStack is the stack whose deployment ws is, as the caller sees
// it: nil for people's workspaces, and for one a stack deleted since kept
// (it is people's again) or one of a stack the caller may not read.
func (u *UI) managingStack(ctx context.Context, ws *workspace.Workspace) *stack.Stack {
	if ws.Settings.ManagedBy == "" || u.o.Stacks == nil {
		return nil
	}
	st, err := u.o.Stacks.GetStack(ctx, ws.Settings.ManagedBy)
	if err != nil {
		return nil
	}
	return st
}

// workspaceAllowing finds the page's workspace (loadWorkspace) and asks
// whether the caller may do action there; when not, or when it is not
// found, it answers with the error page and ok is false.
func (u *UI) workspaceAllowing(w http.ResponseWriter, r *http.Request, action authz.Action) (ws *workspace.Workspace, res authz.Resource, ok bool) {
	ws, res, err := u.loadWorkspace(r)
	if err == nil {
		err = authz.Allows(r.Context(), action, res)
	}
	if err != nil {
		u.fail(w, r, err)
		return nil, res, false
	}
	return ws, res, true
}

type workspaceData struct {
	W        *workspace.Workspace
	Runs     []*run.Run
	Outputs  []outputView
	Can      map[string]bool
	Error    string
	HasState bool
	Health   string
	// NoCode: the workspace was provisioned from a no-code module
	// (NoCodeNewer: whose version has moved since).
	NoCode, NoCodeNewer bool
	// VCS is the version control setting, for those who may change it
	// (nil for others).
	VCS *vcsSetting
	// RunForm is what the start run form holds: what was typed, after
	// a refusal.
	RunForm runForm
	// Lock says who holds the workspace's lock (nil: unlocked).
	Lock *lockView
}

// lockView is the holder of a workspace's lock as its page shows it.
type lockView struct {
	// Kind is the holder's: workspace.LockRun, LockUser or LockTeam.
	Kind, ID string
	// Mine: the caller holds it (and may unlock it).
	Mine bool
	// Run is the page of the run that holds it ("" for another holder).
	Run string
}

// lockHolder describes ws's lock for the caller of ctx (nil when it is
// unlocked). Only the holder unlocks (others get the service's 409), and
// the service says whether the caller holds it.
func (u *UI) lockHolder(ctx context.Context, ws *workspace.Workspace) (*lockView, error) {
	if !ws.Locked() {
		return nil, nil
	}
	mine, err := u.o.Workspaces.LockedByCaller(ctx, ws.ID)
	if err != nil {
		return nil, err
	}
	l := &lockView{Kind: ws.LockKind, ID: ws.LockID, Mine: mine}
	if ws.LockKind == workspace.LockRun {
		l.Run = orgPath(ws.Organization, "workspaces", ws.Name, "runs", ws.LockID)
	}
	return l, nil
}

// runForm is what the workspace page's start run form was given.
type runForm struct {
	Message           string
	PlanOnly, Destroy bool
}

// workspaceForms is what the workspace page's forms were given, shown
// again after a refusal so that nothing typed is lost.
type workspaceForms struct {
	Run runForm
	// VCS (when not nil) is what the version control form was given and
	// VCSErr its refusal.
	VCS    *repoForm
	VCSErr string
}

// vcsSetting is the workspace page's version control setting.
type vcsSetting struct {
	// Tokens are the organization's OAuth tokens the connect form offers
	// (when the workspace is not connected).
	Tokens []tokenChoice
	// Form is what the form holds: what was typed (after a refusal), else
	// the connection's branch.
	Form repoForm
	// Error is the refusal of what was typed.
	Error string
}

// repoForm is what the workspace page's version control form was given.
type repoForm struct {
	Token, Identifier, Branch string
}

func (u *UI) workspace(w http.ResponseWriter, r *http.Request) {
	u.showWorkspace(w, r, http.StatusOK, "")
}

func (u *UI) showWorkspace(w http.ResponseWriter, r *http.Request, status int, formErr string) {
	u.showWorkspacePage(w, r, status, formErr, workspaceForms{})
}

// showWorkspacePage renders the workspace page with formErr (a refusal)
// above it and forms in its forms.
func (u *UI) showWorkspacePage(w http.ResponseWriter, r *http.Request, status int, formErr string, forms workspaceForms) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := workspaceData{W: ws, Error: formErr, RunForm: forms.Run, Can: map[string]bool{
		"plan":     allowed(ctx, authz.RunPlan, res),
		"apply":    allowed(ctx, authz.RunApply, res),
		"lock":     allowed(ctx, authz.WorkspaceLock, res),
		"force":    allowed(ctx, authz.WorkspaceForceUnlock, res),
		"outputs":  allowed(ctx, authz.StateReadOutputs, res),
		"state":    allowed(ctx, authz.StateRead, res),
		"vars":     allowed(ctx, authz.VariableRead, res),
		"varwrite": allowed(ctx, authz.VariableWrite, res),
	}}
	if d.Lock, err = u.lockHolder(ctx, ws); err != nil {
		u.fail(w, r, err)
		return
	}
	runs, err := u.o.Runs.List(ctx, ws.ID, run.ListOptions{})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if len(runs) > 20 {
		runs = runs[:20]
	}
	d.Runs = runs
	if d.Can["outputs"] && u.o.States != nil {
		outs, err := u.o.States.CurrentOutputs(ctx, ws.ID)
		if err != nil && core.KindOf(err) != core.KindNotFound {
			u.fail(w, r, err)
			return
		}
		d.Outputs = outputViews(outs)
		d.HasState = err == nil
	}
	if ws.Settings.AssessmentsEnabled {
		d.Health = u.health(ctx, ws.ID)
	}
	if u.o.NoCode != nil {
		if _, err := u.o.NoCode.WorkspaceModule(ctx, ws.ID); err == nil {
			d.NoCode = true
			_, d.NoCodeNewer = u.o.NoCode.WorkspaceNoCode(ctx, ws.ID)
		}
	}
	if u.mayChangeVCS(ctx, res) == nil {
		d.VCS = &vcsSetting{Error: forms.VCSErr}
		switch {
		case forms.VCS != nil:
			d.VCS.Form = *forms.VCS
		case ws.Settings.VCSRepo != nil:
			d.VCS.Form.Branch = ws.Settings.VCSRepo.Branch
		}
		if ws.Settings.VCSRepo == nil {
			if d.VCS.Tokens, err = u.tokenChoices(ctx, ws.Organization); err != nil {
				u.fail(w, r, err)
				return
			}
		}
	}
	u.render(w, r, status, "workspace", ws.Name, ws.Organization, d)
}

// mayChangeVCS asks whether the caller may change the workspace's
// version control setting on its page: the API's rule for vcs-repo (the
// right to change the workspace's settings, which workspace.Service.Update
// asks) and the right to read the organization's VCS providers, whose
// tokens the form offers. No VCS providers on this server: not found.
func (u *UI) mayChangeVCS(ctx context.Context, res authz.Resource) error {
	if u.o.VCS == nil {
		return core.NotFound("VCS providers are not kept by this server")
	}
	if err := authz.Allows(ctx, authz.WorkspaceUpdate, res); err != nil {
		return err
	}
	return authz.Allows(ctx, authz.OrgReadVCS, authz.Resource{Organization: res.Organization})
}

// setWorkspaceVCS connects the workspace to a repository (one of the
// organization's OAuth tokens, the repository, an optional branch: its
// default branch when none) or, when connected, changes its branch (none:
// the repository's default), as the API's vcs-repo does: the same service
// checks the caller, the token and the host. A refusal (the host has no
// such repository or branch) is a 422 shown above the form with what was
// typed, and changes nothing.
func (u *UI) setWorkspaceVCS(w http.ResponseWriter, r *http.Request) {
	form := repoForm{Token: strings.TrimSpace(r.PostFormValue("oauth_token_id")),
		Identifier: strings.TrimSpace(r.PostFormValue("vcs_identifier")), Branch: strings.TrimSpace(r.PostFormValue("vcs_branch"))}
	// A token or repository left out keeps the connection's (the branch
	// form sends neither); a connection is always given the branch typed.
	opts := workspace.VCSRepoOptions{OAuthTokenID: formValue(r, "oauth_token_id"),
		Identifier: formValue(r, "vcs_identifier"), Branch: &form.Branch}
	u.changeWorkspaceVCS(w, r, workspace.Options{VCSRepo: &opts}, &form)
}

// disconnectWorkspaceVCS removes the workspace's connection (the API's
// vcs-repo: null): its webhook goes from the host, and the workspace is
// CLI-driven from then on.
func (u *UI) disconnectWorkspaceVCS(w http.ResponseWriter, r *http.Request) {
	u.changeWorkspaceVCS(w, r, workspace.Options{RemoveVCSRepo: true}, nil)
}

// changeWorkspaceVCS updates the page's workspace with o, for a caller
// who may change its version control setting; a refusal is shown on the
// page with form (what was typed, nil for none).
func (u *UI) changeWorkspaceVCS(w http.ResponseWriter, r *http.Request, o workspace.Options, form *repoForm) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.mayChangeVCS(ctx, res); err != nil {
		u.fail(w, r, err)
		return
	}
	if _, err := u.o.Workspaces.Update(ctx, ws.ID, o); err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showWorkspacePage(w, r, status, "", workspaceForms{VCS: form, VCSErr: formErr})
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, "PATCH /api/v2/workspaces/{id}", http.StatusOK, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name), http.StatusSeeOther)
}

// startRun queues a run of the workspace's latest configuration version
// (the run service asks the model: apply permission for a run that may
// apply, plan permission for a plan-only run).
func (u *UI) startRun(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	ws, _, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	form := runForm{Message: r.PostFormValue("message"), PlanOnly: r.PostFormValue("plan_only") == "on", Destroy: r.PostFormValue("destroy") == "on"}
	msg := strings.TrimSpace(form.Message)
	if msg == "" {
		msg = "Queued from the web UI"
	}
	opts := run.CreateOptions{WorkspaceID: ws.ID, Message: &msg, PlanOnly: &form.PlanOnly, Source: "tfe-ui"}
	if form.Destroy {
		opts.IsDestroy = &form.Destroy
	}
	rn, err := u.o.Runs.Create(ctx, opts)
	if err != nil {
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showWorkspacePage(w, r, status, formErr, workspaceForms{Run: form})
		}, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	u.record(r, ws.Organization, "POST /api/v2/runs", http.StatusCreated, rn.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name, "runs", rn.ID), http.StatusSeeOther)
}

func (u *UI) lockWorkspace(w http.ResponseWriter, r *http.Request) { u.setLock(w, r, "lock") }

// unlockWorkspace releases the caller's lock or, with force=on (the
// page's Force unlock, offered to those the API lets force-unlock: the
// workspace's admins), anyone's, as the API's force-unlock does.
func (u *UI) unlockWorkspace(w http.ResponseWriter, r *http.Request) {
	if r.PostFormValue("force") == "on" {
		u.setLock(w, r, "force-unlock")
		return
	}
	u.setLock(w, r, "unlock")
}

// setLock takes the API's lock action (lock, unlock or force-unlock) on
// the page's workspace, asking what the API's guard asks.
func (u *UI) setLock(w http.ResponseWriter, r *http.Request, action string) {
	ctx := r.Context()
	ws, res, err := u.loadWorkspace(r)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	need := authz.WorkspaceLock
	if action == "force-unlock" {
		need = authz.WorkspaceForceUnlock
	}
	if err := authz.Allows(ctx, need, res); err != nil {
		u.fail(w, r, err)
		return
	}
	switch action {
	case "lock":
		_, err = u.o.Workspaces.Lock(ctx, ws.ID, strings.TrimSpace(r.PostFormValue("reason")))
	default:
		_, err = u.o.Workspaces.Unlock(ctx, ws.ID, action == "force-unlock")
	}
	if err != nil {
		u.failForm(w, r, err, u.showWorkspace, http.StatusConflict, core.KindConflict, core.KindForbidden)
		return
	}
	u.record(r, ws.Organization, "POST /api/v2/workspaces/{id}/actions/"+action, http.StatusOK, "", "id", ws.ID)
	http.Redirect(w, r, orgPath(ws.Organization, "workspaces", ws.Name), http.StatusSeeOther)
}
