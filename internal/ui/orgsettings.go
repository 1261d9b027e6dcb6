package ui

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/team"
)

// The organization's settings (HCP Terraform's organization Settings).
//
// General (/app/{org}/settings) shows what the organization service keeps
// of the organization, to every member, as the API's read does
// (authz.OrgRead); those who manage the organization (authz.OrgManage, as
// PATCH and DELETE /api/v2/organizations/{org} ask) change it, rename it
// (the pages move to the new name) and delete it, after typing its name.
//
// Members (/app/{org}/settings/members) lists the organization's
// memberships to every member, as the API's list does (OrgRead); those
// with manage-membership (authz.OrgManageMembers) invite people by email
// into teams they may add members to (authz.TeamMembers), and remove
// memberships (authz.OrgRemoveMember, which also lets a user leave). The
// team service decides again on every change.

// registerOrgSettings adds the routes of the organization's settings and members pages.
func (u *UI) registerOrgSettings(mux *http.ServeMux) {
	mux.HandleFunc("GET /app/{org}/settings", u.orgSettings)
	mux.HandleFunc("POST /app/{org}/settings", u.updateOrgSettings)
	mux.HandleFunc("POST /app/{org}/settings/delete", u.deleteOrganization)
	mux.HandleFunc("GET /app/{org}/settings/members", u.orgMembers)
	mux.HandleFunc("POST /app/{org}/settings/members", u.inviteMember)
	mux.HandleFunc("POST /app/{org}/settings/members/{id}/delete", u.removeMember)
}

// --- General

// orgSettingsForm is the settings form as shown or as it was sent. It has
// the settings Terrace acts on only: the API keeps others HCP Terraform
// has (session lengths, cost estimation, the stacks flag, speculative
// plan management, commit status choices) for its
// clients, but nothing here reads them, and a page offering them would
// promise what does not happen. The form leaves them as they are.
type orgSettingsForm struct {
	Name, Email              string
	ExecutionMode, AgentPool string
	Assessments, UserTokens  bool
	// ForceDelete is allow-force-delete-workspaces: workspace admins
	// who are not owners may force-delete (authz.WorkspaceForceDelete).
	ForceDelete bool
}

// settingsFormOf is the form as the organization's settings fill it.
func settingsFormOf(o *organization.Organization) orgSettingsForm {
	s := o.Settings
	return orgSettingsForm{
		Name: o.Name, Email: o.Email, ExecutionMode: s.DefaultExecutionMode, AgentPool: s.DefaultAgentPoolID,
		Assessments: s.AssessmentsEnforced, UserTokens: s.UserTokensEnabled == nil || *s.UserTokensEnabled,
		ForceDelete: s.AllowForceDeleteWorkspaces,
	}
}

// sentSettingsForm is the form as r posted it. A checkbox left unticked
// is not sent: the form sends every setting, so its absence is false.
func sentSettingsForm(r *http.Request) orgSettingsForm {
	on := func(name string) bool { return r.PostFormValue(name) == "on" }
	return orgSettingsForm{
		Name: strings.TrimSpace(r.PostFormValue("name")), Email: strings.TrimSpace(r.PostFormValue("email")),
		ExecutionMode: r.PostFormValue("default_execution_mode"), AgentPool: r.PostFormValue("default_agent_pool"),
		Assessments: on("assessments_enforced"), UserTokens: on("user_tokens_enabled"),
		ForceDelete: on("allow_force_delete_workspaces"),
	}
}

// options are the organization service's changes the form asks for
// (withPool: the form offered the default agent pool). The service
// validates the rest, as it does the API's.
func (f orgSettingsForm) options(withPool bool) organization.UpdateOptions {
	o := organization.UpdateOptions{
		Name: &f.Name, Email: &f.Email, DefaultExecutionMode: &f.ExecutionMode,
		AssessmentsEnforced: &f.Assessments, UserTokensEnabled: &f.UserTokens,
		AllowForceDeleteWorkspaces: &f.ForceDelete,
	}
	// A pool goes with agent execution only: in another mode the service
	// drops it.
	if withPool && f.ExecutionMode == "agent" {
		pool := f.AgentPool
		o.DefaultAgentPoolID = &pool
	}
	return o
}

// deleteForm is the delete form's confirmation as typed and its refusal.
type deleteForm struct{ Confirm, Error string }

type poolChoice struct{ ID, Name string }

type orgSettingsData struct {
	Org  *organization.Organization
	Form orgSettingsForm
	// Manage: the caller may change, rename and delete the organization.
	Manage bool
	Modes  []string
	// Pools are the agent pools the default one is chosen from (none: no
	// choice offered).
	Pools []poolChoice
	// Error is the settings form's refusal; Saved: the settings were just
	// saved (?saved=1).
	Error  string
	Saved  bool
	Delete deleteForm
}

func orgSettingsPath(org string) string { return orgPath(org, "settings") }

func (u *UI) orgSettings(w http.ResponseWriter, r *http.Request) {
	u.showOrgSettings(w, r, http.StatusOK, nil, "", deleteForm{})
}

// showOrgSettings renders the General page; form nil shows the settings as
// stored.
func (u *UI) showOrgSettings(w http.ResponseWriter, r *http.Request, status int, form *orgSettingsForm, formErr string, del deleteForm) {
	ctx := r.Context()
	name := r.PathValue("org")
	res := authz.Resource{Organization: name}
	if err := authz.Allows(ctx, authz.OrgRead, res); err != nil {
		u.fail(w, r, err)
		return
	}
	o, err := u.o.Orgs.Get(ctx, name)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	d := orgSettingsData{Org: o, Manage: allowed(ctx, authz.OrgManage, res), Modes: []string{"remote", "local", "agent"},
		Error: formErr, Saved: r.URL.Query().Get("saved") != "" && status == http.StatusOK, Delete: del}
	if form != nil {
		d.Form = *form
	} else {
		d.Form = settingsFormOf(o)
	}
	if d.Manage && u.o.AgentPools != nil {
		pools, err := u.o.AgentPools.List(ctx, name)
		if err != nil {
			u.fail(w, r, err)
			return
		}
		for _, p := range pools {
			d.Pools = append(d.Pools, poolChoice{ID: p.ID, Name: p.Name})
		}
	}
	u.renderPage(w, r, status, "orgsettings", page{Title: "Organization settings", Org: name, Data: d,
		Crumbs: []crumb{{Name: "Settings"}}})
}

func (u *UI) updateOrgSettings(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: name}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := sentSettingsForm(r)
	show := func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		u.showOrgSettings(w, r, status, &form, formErr, deleteForm{})
	}
	_, withPool := r.PostForm["default_agent_pool"]
	o, err := u.o.Orgs.Update(ctx, name, form.options(withPool))
	if err != nil {
		u.failForm(w, r, err, show, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict)
		return
	}
	// The event goes in the trail of the organization under its new
	// name (the old one finds none after a rename).
	u.record(r, o.Name, "PATCH /api/v2/organizations/{org}", http.StatusOK, "", "org", name)
	http.Redirect(w, r, orgSettingsPath(o.Name)+"?saved=1", http.StatusSeeOther)
}

// deleteOrganization deletes the organization once its name was typed to
// confirm, and leads to the organizations list.
func (u *UI) deleteOrganization(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	name := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: name}); err != nil {
		u.fail(w, r, err)
		return
	}
	confirm := strings.TrimSpace(r.PostFormValue("confirm"))
	if confirm != name {
		u.showOrgSettings(w, r, http.StatusUnprocessableEntity, nil, "", deleteForm{Confirm: confirm,
			Error: fmt.Sprintf("Type the organization's name, %s, to confirm: nothing was deleted.", name)})
		return
	}
	if err := u.o.Orgs.Delete(ctx, name); err != nil {
		u.fail(w, r, err)
		return
	}
	u.record(r, name, "DELETE /api/v2/organizations/{org}", http.StatusNoContent, "", "org", name)
	http.Redirect(w, r, "/app/organizations", http.StatusSeeOther)
}

// --- Members

// memberView is a membership as the members page shows it.
type memberView struct {
	ID, Username, Email, Status string
	// Teams are the names of its teams the caller sees; Hidden counts
	// those the caller does not (the API names them by ID).
	Teams  []string
	Hidden int
	// Remove: the caller may remove it (Self: it is the caller's own,
	// which removing leaves the organization).
	Remove, Self bool
}

// teamChoice is a team the invite form offers.
type teamChoice struct {
	ID, Name string
	Checked  bool
}

// inviteForm is what the invite form was given.
type inviteForm struct {
	Email string
	Teams []string
}

type orgMembersData struct {
	Members []memberView
	Pager   pager
	// Query is the search (a part of a username or an email).
	Query string
	// Manage: the caller may invite (manage-membership); Teams are those
	// the caller may invite into.
	Manage bool
	Teams  []teamChoice
	Form   inviteForm
	// Error is the invite form's refusal, RemoveError a removal's.
	Error, RemoveError string
	// Invited is the email of the membership just created (?invited=ID).
	Invited string
}

func orgMembersPath(org string) string { return orgPath(org, "settings", "members") }

// servesMembers answers 404 when this server keeps no teams (nor
// memberships).
func (u *UI) servesMembers(w http.ResponseWriter, r *http.Request) bool {
	if u.o.Teams == nil {
		u.notFound(w, r)
		return false
	}
	return true
}

func (u *UI) orgMembers(w http.ResponseWriter, r *http.Request) {
	u.showOrgMembers(w, r, http.StatusOK, inviteForm{}, "", "")
}

func (u *UI) showOrgMembers(w http.ResponseWriter, r *http.Request, status int, form inviteForm, formErr, removeErr string) {
	if !u.servesMembers(w, r) {
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	res := authz.Resource{Organization: org}
	if err := authz.Allows(ctx, authz.OrgRead, res); err != nil {
		u.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	invited := q.Get("invited")
	q.Del("invited")
	var users map[string]*auth.User
	ms, pg, err := listPage(q, func(offset, limit int) ([]*team.Membership, int, error) {
		ms, us, total, err := u.o.Teams.ListMemberships(ctx, org, team.MembershipFilter{Query: q.Get("q")}, offset, limit)
		users = us
		return ms, total, err
	})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	teams, err := u.o.Teams.List(ctx, org, team.ListOptions{})
	if err != nil {
		u.fail(w, r, err)
		return
	}
	// The caller may change the members of these teams (TeamMembers),
	// which removing someone from the organization takes of each of
	// their teams, and inviting into a team too.
	may, err := authz.TeamsAllowing(ctx, org, authz.TeamMembers)
	if err != nil {
		u.fail(w, r, err)
		return
	}
	byID := map[string]*team.Team{}
	for _, t := range teams {
		byID[t.ID] = t
	}
	d := orgMembersData{Pager: pg, Query: q.Get("q"), Manage: allowed(ctx, authz.OrgManageMembers, res), Form: form,
		Error: formErr, RemoveError: removeErr}
	p := auth.FromContext(ctx)
	for _, m := range ms {
		v := memberView{ID: m.ID, Status: m.Status, Self: p.IsUser() && p.UserID == m.UserID}
		if usr := users[m.UserID]; usr != nil {
			v.Username, v.Email = usr.Username, usr.Email
		}
		// Removing is the service's decision made ahead: OrgRemoveMember,
		// and, unless the user leaves, TeamMembers on each of their teams
		// (one the caller cannot see refuses it).
		v.Remove = allowed(ctx, authz.OrgRemoveMember, authz.Resource{Organization: org, UserID: m.UserID})
		for _, id := range m.TeamIDs {
			t, ok := byID[id]
			if ok {
				v.Teams = append(v.Teams, t.Name)
			} else {
				v.Hidden++
			}
			if !v.Self && (!ok || !may(t.Authz())) {
				v.Remove = false
			}
		}
		if invited != "" && m.ID == invited && status == http.StatusOK {
			d.Invited = v.Email
		}
		d.Members = append(d.Members, v)
	}
	if d.Manage {
		chosen := map[string]bool{}
		for _, id := range form.Teams {
			chosen[id] = true
		}
		for _, t := range teams {
			if may(t.Authz()) {
				d.Teams = append(d.Teams, teamChoice{ID: t.ID, Name: t.Name, Checked: chosen[t.ID]})
			}
		}
	}
	u.renderPage(w, r, status, "orgmembers", page{Title: "Members", Org: org, Data: d,
		Crumbs: []crumb{{Name: "Settings", Href: orgSettingsPath(org)}, {Name: "Members"}}})
}

// inviteMember invites an email address into the organization and the
// teams ticked, as POST /organizations/{org}/organization-memberships.
func (u *UI) inviteMember(w http.ResponseWriter, r *http.Request) {
	if !u.servesMembers(w, r) {
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	if err := authz.Allows(ctx, authz.OrgManageMembers, authz.Resource{Organization: org}); err != nil {
		u.fail(w, r, err)
		return
	}
	form := inviteForm{Email: strings.TrimSpace(r.PostFormValue("email")), Teams: r.PostForm["team"]}
	show := func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
		u.showOrgMembers(w, r, status, form, formErr, "")
	}
	if form.Email == "" {
		show(w, r, http.StatusUnprocessableEntity, "An email address is required.")
		return
	}
	m, err := u.o.Teams.CreateMembership(ctx, org, form.Email, form.Teams)
	if err != nil {
		u.failForm(w, r, err, show, http.StatusUnprocessableEntity, core.KindInvalid, core.KindConflict, core.KindNotFound)
		return
	}
	u.record(r, org, "POST /api/v2/organizations/{org}/organization-memberships", http.StatusCreated, m.ID, "org", org)
	http.Redirect(w, r, orgMembersPath(org)+"?invited="+m.ID, http.StatusSeeOther)
}

// removeMember removes a membership of the organization, as DELETE
// /organization-memberships/{id}; the caller's own leaves the
// organization, and leads to the organizations list.
func (u *UI) removeMember(w http.ResponseWriter, r *http.Request) {
	if !u.servesMembers(w, r) {
		return
	}
	ctx := r.Context()
	org := r.PathValue("org")
	m, err := u.o.Teams.GetMembership(ctx, r.PathValue("id"))
	if err == nil && m.Organization != org {
		err = core.NotFound("organization membership %q not found", r.PathValue("id"))
	}
	if err != nil {
		u.fail(w, r, err)
		return
	}
	if err := authz.Allows(ctx, authz.OrgRemoveMember, authz.Resource{Organization: org, UserID: m.UserID}); err != nil {
		u.fail(w, r, err)
		return
	}
	if err := u.o.Teams.DeleteMembership(ctx, m.ID); err != nil {
		// The last owner stays; a member of a team the caller may not
		// change stays too: the page says why.
		u.refuseAsAPI(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			u.showOrgMembers(w, r, status, inviteForm{}, "", formErr)
		}, core.KindConflict, core.KindForbidden, core.KindInvalid)
		return
	}
	u.record(r, org, "DELETE /api/v2/organization-memberships/{id}", http.StatusNoContent, "", "id", m.ID)
	if p := auth.FromContext(ctx); p.IsUser() && p.UserID == m.UserID {
		http.Redirect(w, r, "/app/organizations", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, orgMembersPath(org), http.StatusSeeOther)
}
