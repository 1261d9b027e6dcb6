package team

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/tfeapi"
	"github.com/terracehq/terrace/internal/user"
)

// API serves teams, team members, organization memberships and team tokens
// of the TFE API v2.
type API struct {
	Service *Service
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/organizations/{org}/teams", a.list)
	mux.HandleFunc("POST /api/v2/organizations/{org}/teams", a.create)
	mux.HandleFunc("GET /api/v2/teams/{id}", a.get)
	mux.HandleFunc("PATCH /api/v2/teams/{id}", a.update)
	mux.HandleFunc("DELETE /api/v2/teams/{id}", a.delete)

	mux.HandleFunc("GET /api/v2/teams/{id}/relationships/users", a.listUsers)
	mux.HandleFunc("POST /api/v2/teams/{id}/relationships/users", a.changeMembers(true, false))
	mux.HandleFunc("DELETE /api/v2/teams/{id}/relationships/users", a.changeMembers(false, false))
	mux.HandleFunc("GET /api/v2/teams/{id}/relationships/organization-memberships", a.listTeamMemberships)
	mux.HandleFunc("POST /api/v2/teams/{id}/relationships/organization-memberships", a.changeMembers(true, true))
	mux.HandleFunc("DELETE /api/v2/teams/{id}/relationships/organization-memberships", a.changeMembers(false, true))

	mux.HandleFunc("GET /api/v2/organizations/{org}/organization-memberships", a.listMemberships)
	mux.HandleFunc("POST /api/v2/organizations/{org}/organization-memberships", a.createMembership)
	mux.HandleFunc("GET /api/v2/organization-memberships", a.listOwnMemberships)
	mux.HandleFunc("GET /api/v2/organization-memberships/{id}", a.getMembership)
	mux.HandleFunc("DELETE /api/v2/organization-memberships/{id}", a.deleteMembership)

	mux.HandleFunc("POST /api/v2/teams/{id}/authentication-token", a.createToken(false))
	mux.HandleFunc("GET /api/v2/teams/{id}/authentication-token", a.getLegacyToken)
	mux.HandleFunc("DELETE /api/v2/teams/{id}/authentication-token", a.deleteLegacyToken)
	mux.HandleFunc("POST /api/v2/teams/{id}/authentication-tokens", a.createToken(true))
	mux.HandleFunc("GET /api/v2/teams/{id}/authentication-tokens", a.listTeamTokens)
	mux.HandleFunc("GET /api/v2/organizations/{org}/team-tokens", a.listOrgTokens)
}

// --- wire forms

type jsonTeam struct {
	ID                         string                `jsonapi:"primary,teams"`
	IsUnified                  bool                  `jsonapi:"attr,is-unified"`
	Name                       string                `jsonapi:"attr,name"`
	OrganizationAccess         *Access               `jsonapi:"attr,organization-access"`
	Visibility                 string                `jsonapi:"attr,visibility"`
	Permissions                *jsonTeamPermissions  `jsonapi:"attr,permissions"`
	UserCount                  int                   `jsonapi:"attr,users-count"`
	SSOTeamID                  string                `jsonapi:"attr,sso-team-id"`
	AllowMemberTokenManagement bool                  `jsonapi:"attr,allow-member-token-management"`
	Organization               *user.OrganizationRef `jsonapi:"relation,organization"`
	Users                      []*user.UserRef       `jsonapi:"relation,users"`
	OrganizationMemberships    []*membershipRef      `jsonapi:"relation,organization-memberships"`
}

type jsonTeamPermissions struct {
	CanUpdateMembership            bool `json:"can-update-membership"`
	CanDestroy                     bool `json:"can-destroy"`
	CanUpdateOrganizationAccess    bool `json:"can-update-organization-access"`
	CanUpdateAPIToken              bool `json:"can-update-api-token"`
	CanUpdateVisibility            bool `json:"can-update-visibility"`
	CanUpdateName                  bool `json:"can-update-name"`
	CanUpdateSSOTeamID             bool `json:"can-update-sso-team-id"`
	CanUpdateMemberTokenManagement bool `json:"can-update-member-token-management"`
	CanViewAPIToken                bool `json:"can-view-api-token"`
}

type membershipRef struct {
	ID string `jsonapi:"primary,organization-memberships"`
}

type jsonMembership struct {
	ID           string                `jsonapi:"primary,organization-memberships"`
	Status       string                `jsonapi:"attr,status"`
	Email        string                `jsonapi:"attr,email"`
	CreatedAt    time.Time             `jsonapi:"attr,created-at,iso8601"`
	Organization *user.OrganizationRef `jsonapi:"relation,organization"`
	User         *user.UserRef         `jsonapi:"relation,user"`
	Teams        []*user.TeamRef       `jsonapi:"relation,teams"`
}

// teamJSON is a team's wire form for the caller in ctx; its permissions
// are the authorization model's decisions on the team.
func teamJSON(ctx context.Context, t *Team, memberships map[string]*Membership) *jsonTeam {
	may := func(a authz.Action) bool { return allows(ctx, a, t) == nil }
	manage := may(authz.TeamManage)
	tokens := may(authz.TeamManageTokens)
	// A visible team's other visibility is secret, which takes more than
	// managing it (TeamMakeSecret).
	visibility := manage && (t.Settings.Visibility == "secret" || may(authz.TeamMakeSecret))
	access := t.OrganizationAccess()
	j := &jsonTeam{
		ID:                         t.ID,
		Name:                       t.Name,
		OrganizationAccess:         &access,
		Visibility:                 t.Settings.Visibility,
		UserCount:                  len(t.UserIDs),
		SSOTeamID:                  t.Settings.SSOTeamID,
		AllowMemberTokenManagement: t.MembersManageTokens(),
		Organization:               &user.OrganizationRef{Name: t.Organization},
		Users:                      []*user.UserRef{},
		OrganizationMemberships:    []*membershipRef{},
		Permissions: &jsonTeamPermissions{
			CanUpdateMembership: may(authz.TeamMembers),
			// The owners team is never deleted or renamed, and its
			// organization access never changes (Options.apply).
			CanDestroy:                     manage && !t.IsOwners(),
			CanUpdateOrganizationAccess:    manage && may(authz.TeamManageAccess) && !t.IsOwners(),
			CanUpdateAPIToken:              tokens,
			CanUpdateVisibility:            visibility,
			CanUpdateName:                  manage && !t.IsOwners(),
			CanUpdateSSOTeamID:             manage,
			CanUpdateMemberTokenManagement: manage,
			CanViewAPIToken:                tokens,
		},
	}
	for _, id := range t.UserIDs {
		j.Users = append(j.Users, &user.UserRef{ID: id})
		if m := memberships[id]; m != nil {
			j.OrganizationMemberships = append(j.OrganizationMemberships, &membershipRef{ID: m.ID})
		}
	}
	return j
}

func membershipJSON(m *Membership, u *auth.User) *jsonMembership {
	j := &jsonMembership{
		ID: m.ID, Status: m.Status, CreatedAt: m.CreatedAt,
		Organization: &user.OrganizationRef{Name: m.Organization},
		User:         &user.UserRef{ID: m.UserID},
		Teams:        []*user.TeamRef{},
	}
	if u != nil {
		j.Email = u.Email
	}
	for _, id := range m.TeamIDs {
		j.Teams = append(j.Teams, &user.TeamRef{ID: id})
	}
	return j
}

// userJSON renders a user for the caller (its own account with the
// permissions the model gives it).
func userJSON(ctx context.Context, u *auth.User) *user.JSON { return user.UserJSON(ctx, u) }

// --- teams

// teamMemberships maps the user IDs of teams' members to their
// memberships in org (one statement for all the teams): the teams name
// their members' memberships. A rendered membership names its teams too:
// withTeams reads them (one more statement).
func (a *API) teamMemberships(r *http.Request, org string, withTeams bool, teams ...*Team) map[string]*Membership {
	var users []string
	for _, t := range teams {
		users = append(users, t.UserIDs...)
	}
	m, err := a.Service.MembershipsOf(r.Context(), org, users, withTeams)
	if err != nil {
		return map[string]*Membership{}
	}
	return m
}

func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := tfeapi.Includes(r, "users", "organization-memberships", "organization-memberships.user")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	org := r.PathValue("org")
	items, total, err := a.Service.ListPage(r.Context(), org, ListOptions{Names: splitList(q.Get("filter[names]")), Query: q.Get("q")}, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	ms := a.teamMemberships(r, org, includesMemberships(inc), items...)
	out := make([]*jsonTeam, len(items))
	for i, t := range items {
		out[i] = teamJSON(r.Context(), t, ms)
	}
	included, err := a.teamIncludes(r, items, ms, inc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.RespondList(w, r, out, pg, included...)
}

// includesMemberships says whether a team request's includes (inc) render
// memberships.
func includesMemberships(inc map[string]bool) bool {
	return inc["organization_memberships"] || inc["organization_memberships.user"]
}

// teamIncludes are the included users and memberships of teams' members
// (ms, their memberships), each team's in turn; the users are read in one
// statement.
func (a *API) teamIncludes(r *http.Request, teams []*Team, ms map[string]*Membership, inc map[string]bool) ([]any, error) {
	if !inc["users"] && !includesMemberships(inc) {
		return nil, nil
	}
	ctx := r.Context()
	var ids []string
	for _, t := range teams {
		ids = append(ids, t.UserIDs...)
	}
	users, err := a.Service.users.GetUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, t := range teams {
		if inc["users"] || inc["organization_memberships.user"] {
			for _, id := range t.UserIDs {
				if u := users[id]; u != nil {
					out = append(out, userJSON(ctx, u))
				}
			}
		}
		if includesMemberships(inc) {
			for _, id := range t.UserIDs {
				if u, m := users[id], ms[id]; u != nil && m != nil {
					out = append(out, membershipJSON(m, u))
				}
			}
		}
	}
	return out, nil
}

func (a *API) respondTeam(w http.ResponseWriter, r *http.Request, status int, t *Team) {
	inc, err := tfeapi.Includes(r, "users", "organization-memberships", "organization-memberships.user")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ms := a.teamMemberships(r, t.Organization, includesMemberships(inc), t)
	included, err := a.teamIncludes(r, []*Team{t}, ms, inc)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, status, teamJSON(r.Context(), t, ms), included...)
}

func decodeOptions(w http.ResponseWriter, r *http.Request) (Options, error) {
	var opts Options
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return opts, err
	}
	return opts, doc.Attrs(&opts)
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, err := a.Service.Create(r.Context(), r.PathValue("org"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTeam(w, r, http.StatusCreated, t)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTeam(w, r, http.StatusOK, t)
}

func (a *API) update(w http.ResponseWriter, r *http.Request) {
	opts, err := decodeOptions(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, err := a.Service.Update(r.Context(), r.PathValue("id"), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondTeam(w, r, http.StatusOK, t)
}

func (a *API) delete(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.Delete(r.Context(), r.PathValue("id")))
}

// --- members

func (a *API) listUsers(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	users, err := a.Service.Users(r.Context(), t)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	out := make([]*user.JSON, len(users))
	for i, u := range users {
		out[i] = userJSON(r.Context(), u)
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

func (a *API) listTeamMemberships(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	users, err := a.Service.Users(r.Context(), t)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ms := a.teamMemberships(r, t.Organization, true, t)
	var out []*jsonMembership
	for _, u := range users {
		if m := ms[u.ID]; m != nil {
			out = append(out, membershipJSON(m, u))
		}
	}
	tfeapi.RespondList(w, r, out, tfeapi.Pagination{Page: 1, Size: max(len(out), 1), Total: len(out)})
}

// changeMembers adds or removes team members given as users (data ids are
// usernames, as go-tfe sends them) or organization memberships.
func (a *API) changeMembers(add, memberships bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		res, err := tfeapi.DecodeResources(w, r)
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		var ids []string
		for _, x := range res {
			if x.ID == "" {
				tfeapi.Error(w, r, core.Invalid("every element of data needs an id"))
				return
			}
			ids = append(ids, x.ID)
		}
		ctx, id := r.Context(), r.PathValue("id")
		switch {
		case add && memberships:
			err = a.Service.AddMemberships(ctx, id, ids)
		case add:
			err = a.Service.AddUsers(ctx, id, ids)
		case memberships:
			err = a.Service.RemoveMemberships(ctx, id, ids)
		default:
			err = a.Service.RemoveUsers(ctx, id, ids)
		}
		if err != nil {
			tfeapi.Error(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// --- organization memberships

func (a *API) membershipIncluded(r *http.Request, ms []*Membership, users map[string]*auth.User, inc map[string]bool) []any {
	ctx := r.Context()
	var out []any
	if inc["user"] {
		for _, m := range ms {
			if u := users[m.UserID]; u != nil {
				out = append(out, userJSON(ctx, u))
			}
		}
	}
	if inc["teams"] {
		for _, m := range ms {
			for _, tid := range m.TeamIDs {
				if t, err := a.Service.Get(r.Context(), tid); err == nil {
					out = append(out, teamJSON(r.Context(), t, nil))
				}
			}
		}
	}
	return out
}

func (a *API) listMemberships(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := tfeapi.Includes(r, "user", "teams")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	q := r.URL.Query()
	status := q.Get("filter[status]")
	if status != "" && status != StatusInvited && status != StatusActive {
		tfeapi.Error(w, r, core.BadRequest("filter[status] must be invited or active, not %q", status))
		return
	}
	items, users, total, err := a.Service.ListMemberships(r.Context(), r.PathValue("org"), MembershipFilter{
		Emails: splitList(q.Get("filter[email]")), Status: status, Query: q.Get("q"),
	}, page.Offset(), page.Size)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	pg := tfeapi.Pagination{Page: page.Number, Size: page.Size, Total: total}
	out := make([]*jsonMembership, len(items))
	for i, m := range items {
		out[i] = membershipJSON(m, users[m.UserID])
	}
	tfeapi.RespondList(w, r, out, pg, a.membershipIncluded(r, items, users, inc)...)
}

func (a *API) listOwnMemberships(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	inc, err := tfeapi.Includes(r, "user", "teams")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	ms, err := a.Service.ListOwnMemberships(r.Context())
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	p := auth.FromContext(r.Context())
	u, err := a.Service.User(r.Context(), p.UserID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	users := map[string]*auth.User{u.ID: u}
	items, pg := tfeapi.Paginate(ms, page)
	out := make([]*jsonMembership, len(items))
	for i, m := range items {
		out[i] = membershipJSON(m, u)
	}
	tfeapi.RespondList(w, r, out, pg, a.membershipIncluded(r, items, users, inc)...)
}

func (a *API) respondMembership(w http.ResponseWriter, r *http.Request, status int, m *Membership, inc map[string]bool) {
	u, err := a.Service.User(r.Context(), m.UserID)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	users := map[string]*auth.User{u.ID: u}
	tfeapi.Respond(w, r, status, membershipJSON(m, u), a.membershipIncluded(r, []*Membership{m}, users, inc)...)
}

func (a *API) createMembership(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var attrs struct {
		Email *string `json:"email"`
	}
	if err := doc.Attrs(&attrs); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if attrs.Email == nil || *attrs.Email == "" {
		tfeapi.Error(w, r, core.Invalid("email is required"))
		return
	}
	teams, err := doc.RelResources("teams")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var teamIDs []string
	for _, t := range teams {
		teamIDs = append(teamIDs, t.ID)
	}
	m, err := a.Service.CreateMembership(r.Context(), r.PathValue("org"), *attrs.Email, teamIDs)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	// As HCP Terraform does, the response includes the user.
	a.respondMembership(w, r, http.StatusCreated, m, map[string]bool{"user": true})
}

func (a *API) getMembership(w http.ResponseWriter, r *http.Request) {
	inc, err := tfeapi.Includes(r, "user", "teams")
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	m, err := a.Service.GetMembership(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondMembership(w, r, http.StatusOK, m, inc)
}

func (a *API) deleteMembership(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteMembership(r.Context(), r.PathValue("id")))
}

// --- team tokens

// Tokens is the team token kind, for authentication-tokens/{id}.
func (a *API) Tokens() user.TokenKind {
	return user.TokenKind{Check: a.Service.CheckToken, Delete: a.Service.DeleteToken,
		JSON: func(ctx context.Context, tok *auth.Token, secret string) *user.TokenJSON {
			// A team token's organization creator can only be the team's
			// own organization.
			return user.TokenToJSON(ctx, tok, secret, func(ctx context.Context, _ string) (string, error) {
				return a.Service.TeamOrganization(ctx, tok.Subject)
			})
		}}
}

func (a *API) createToken(described bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		a.Tokens().Create(w, r, func(attrs user.TokenAttrs) (*auth.Token, string, error) {
			opts := TokenOptions{ExpiredAt: attrs.ExpiredAt}
			if described {
				d := attrs.Desc()
				opts.Description = &d
			}
			return a.Service.CreateToken(r.Context(), r.PathValue("id"), opts)
		})
	}
}

func (a *API) getLegacyToken(w http.ResponseWriter, r *http.Request) {
	tok, err := a.Service.LegacyToken(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.Tokens().JSON(r.Context(), tok, ""))
}

func (a *API) deleteLegacyToken(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteLegacyToken(r.Context(), r.PathValue("id")))
}

func (a *API) listTeamTokens(w http.ResponseWriter, r *http.Request) {
	a.Tokens().List(w, r, func() ([]*auth.Token, error) { return a.Service.Tokens(r.Context(), r.PathValue("id")) })
}

func (a *API) listOrgTokens(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.Tokens().List(w, r, func() ([]*auth.Token, error) {
		return a.Service.OrganizationTokens(r.Context(), r.PathValue("org"), q.Get("q"), q.Get("sort"))
	})
}
