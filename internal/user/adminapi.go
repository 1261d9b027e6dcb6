package user

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// registerAdmin adds the admin users API (admin.go).
func (a *API) registerAdmin(mux *http.ServeMux) {
	suspend := func(v bool) adminChange {
		return func(ctx context.Context, id string) (*AdminUser, error) { return a.Service.Suspend(ctx, id, v) }
	}
	siteAdmin := func(v bool) adminChange {
		return func(ctx context.Context, id string) (*AdminUser, error) { return a.Service.SetSiteAdmin(ctx, id, v) }
	}
	mux.HandleFunc("GET /api/v2/admin/users", tfeapi.Handle(a.adminList))
	mux.HandleFunc("DELETE /api/v2/admin/users/{id}", a.adminDelete)
	mux.HandleFunc("POST /api/v2/admin/users/{id}/actions/suspend", a.adminAction(suspend(true)))
	mux.HandleFunc("POST /api/v2/admin/users/{id}/actions/unsuspend", a.adminAction(suspend(false)))
	mux.HandleFunc("POST /api/v2/admin/users/{id}/actions/grant_admin", a.adminAction(siteAdmin(true)))
	mux.HandleFunc("POST /api/v2/admin/users/{id}/actions/revoke_admin", a.adminAction(siteAdmin(false)))
	mux.HandleFunc("POST /api/v2/admin/users/{id}/actions/disable_two_factor", a.adminAction(a.Service.DisableTwoFactor))
}

// jsonAdminUser is the wire form of the admin users API (go-tfe's
// AdminUser).
type jsonAdminUser struct {
	ID               string             `jsonapi:"primary,users"`
	Username         string             `jsonapi:"attr,username"`
	Email            string             `jsonapi:"attr,email"`
	AvatarURL        string             `jsonapi:"attr,avatar-url"`
	TwoFactor        *twoFactor         `jsonapi:"attr,two-factor"`
	IsAdmin          bool               `jsonapi:"attr,is-admin"`
	IsSuspended      bool               `jsonapi:"attr,is-suspended"`
	IsServiceAccount bool               `jsonapi:"attr,is-service-account"`
	IsSCIMManaged    bool               `jsonapi:"attr,is-scim-managed"`
	Organizations    []*OrganizationRef `jsonapi:"relation,organizations"`
}

func adminUserJSON(u *AdminUser) *jsonAdminUser {
	j := &jsonAdminUser{ID: u.ID, Username: u.Username, Email: u.Email, AvatarURL: avatarURL(u.Email), TwoFactor: &twoFactor{},
		IsAdmin: u.SiteAdmin, IsSuspended: u.Suspended, Organizations: []*OrganizationRef{}}
	for _, o := range u.Organizations {
		j.Organizations = append(j.Organizations, &OrganizationRef{Name: o})
	}
	return j
}

// adminFilters are the filters of GET admin/users.
var adminFilters = []string{"filter[admin]", "filter[suspended]"}

// boolFilter reads a filter whose value is "true" or "false" (nil when
// absent).
func boolFilter(q url.Values, name string) (*bool, error) {
	if _, ok := q[name]; !ok {
		return nil, nil
	}
	switch v := q.Get(name); v {
	case "true", "false":
		b := v == "true"
		return &b, nil
	default:
		return nil, core.BadRequest("%s must be true or false, not %q", name, v)
	}
}

// userFilter reads the query of GET admin/users: q (part of a username
// or email), filter[admin] and filter[suspended]; any other filter is a
// 400, rather than a list that silently ignores it.
func userFilter(q url.Values) (auth.UserFilter, error) {
	for k := range q {
		if strings.HasPrefix(k, "filter[") && !slices.Contains(adminFilters, k) {
			return auth.UserFilter{}, core.BadRequest("unknown filter %s: the users list filters by %s", k, strings.Join(adminFilters, " and "))
		}
	}
	f := auth.UserFilter{Query: q.Get("q")}
	var err error
	if f.SiteAdmin, err = boolFilter(q, "filter[admin]"); err != nil {
		return f, err
	}
	f.Suspended, err = boolFilter(q, "filter[suspended]")
	return f, err
}

func (a *API) adminList(w http.ResponseWriter, r *http.Request) error {
	f, err := userFilter(r.URL.Query())
	if err != nil {
		return err
	}
	inc, err := tfeapi.Includes(r, "organizations")
	if err != nil {
		return err
	}
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	users, total, err := a.Service.AdminList(r.Context(), f, page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out := make([]*jsonAdminUser, len(users))
	var included []any
	seen := map[string]bool{}
	for i, u := range users {
		out[i] = adminUserJSON(u)
		if !inc["organizations"] || a.IncludeOrganization == nil {
			continue
		}
		for _, o := range u.Organizations {
			if seen[o] {
				continue
			}
			seen[o] = true
			if doc, err := a.IncludeOrganization(r, o); err == nil {
				included = append(included, doc)
			}
		}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}, included...)
	return nil
}

func (a *API) adminDelete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.AdminDelete(r.Context(), r.PathValue("id")))
}

// adminChange is one of the user actions of the admin API.
type adminChange func(ctx context.Context, id string) (*AdminUser, error)

// adminAction serves POST admin/users/{id}/actions/…: the change,
// answered with the user as it is afterwards.
func (a *API) adminAction(change adminChange) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tfeapi.Reply(w, r, http.StatusOK, adminUserJSON)(change(r.Context(), r.PathValue("id")))
	}
}
