package ui

import (
	"net/http"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
)

type orgsData struct {
	Orgs []*organization.Organization
	// CanCreate: the model lets the caller create organizations (a user,
	// who becomes its owner; only a site admin when the site limits
	// organization creation).
	CanCreate bool
	// FirstRun: there is no organization at all yet and the caller is the
	// site admin, who is led to create one.
	FirstRun bool
	Form     orgForm
}

type orgForm struct {
	Name, Email, Error string
}

// home is the organizations list, or the first-run page when the site has
// no organization yet.
func (u *UI) home(w http.ResponseWriter, r *http.Request) {
	u.listOrganizations(w, r, http.StatusOK, orgForm{})
}

func (u *UI) organizations(w http.ResponseWriter, r *http.Request) {
	u.listOrganizations(w, r, http.StatusOK, orgForm{})
}

func (u *UI) listOrganizations(w http.ResponseWriter, r *http.Request, status int, form orgForm) {
	ctx := r.Context()
	orgs, err := u.o.Orgs.List(ctx, "")
	if err != nil {
		u.fail(w, r, err)
		return
	}
	p := auth.FromContext(ctx)
	d := orgsData{Orgs: orgs, CanCreate: allowed(ctx, authz.OrgCreate, authz.Resource{}), Form: form}
	if len(orgs) == 0 && p.SiteAdmin {
		d.FirstRun = true
		u.render(w, r, status, "firstrun", "Welcome to Terrace", "", d)
		return
	}
	// A single organization is where the user works: go straight there.
	if len(orgs) == 1 && r.URL.Path == "/app/" && status == http.StatusOK {
		http.Redirect(w, r, orgPath(orgs[0].Name, "workspaces"), http.StatusSeeOther)
		return
	}
	u.render(w, r, status, "organizations", "Organizations", "", d)
}

func (u *UI) createOrganization(w http.ResponseWriter, r *http.Request) {
	form := orgForm{Name: strings.TrimSpace(r.PostFormValue("name")), Email: strings.TrimSpace(r.PostFormValue("email"))}
	org, err := u.o.Orgs.Create(r.Context(), organization.CreateOptions{Name: form.Name, Email: form.Email})
	if err != nil {
		// A caller the site does not let create organizations sees the
		// form again with 403, as the API answers; a form that breaks a
		// rule gets 422.
		st := http.StatusUnprocessableEntity
		if core.KindOf(err) == core.KindForbidden {
			st = http.StatusForbidden
		}
		u.failForm(w, r, err, func(w http.ResponseWriter, r *http.Request, status int, formErr string) {
			form.Error = formErr
			u.listOrganizations(w, r, status, form)
		}, st, core.KindInvalid, core.KindForbidden)
		return
	}
	u.record(r, "", "POST /api/v2/organizations", http.StatusCreated, org.Name)
	http.Redirect(w, r, orgPath(org.Name, "getting-started"), http.StatusSeeOther)
}

func (u *UI) organization(w http.ResponseWriter, r *http.Request) {
	if _, err := u.o.Orgs.Get(r.Context(), r.PathValue("org")); err != nil {
		u.fail(w, r, err)
		return
	}
	http.Redirect(w, r, orgPath(r.PathValue("org"), "workspaces"), http.StatusSeeOther)
}

// gettingStarted shows the cloud block to paste for an organization.
func (u *UI) gettingStarted(w http.ResponseWriter, r *http.Request) {
	org, err := u.o.Orgs.Get(r.Context(), r.PathValue("org"))
	if err != nil {
		u.fail(w, r, err)
		return
	}
	u.render(w, r, http.StatusOK, "gettingstarted", "Getting started", org.Name, map[string]any{
		"Org": org, "Hostname": u.o.Hostname, "CAFile": u.o.CAFile, "CloudBlock": cloudBlock(u.o.Hostname, org.Name, "my-workspace"),
		"CanCreateWorkspace": allowed(r.Context(), authz.OrgCreateWorkspace, authz.Resource{Organization: org.Name}),
	})
}

func cloudBlock(host, org, ws string) string {
	return `terraform {
  cloud {
    hostname     = "` + host + `"
    organization = "` + org + `"
    workspaces { name = "` + ws + `" }
  }
}`
}
