package user

import (
	"context"
	"net/http"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// API serves the account, users, user tokens, organization tokens and
// authentication-tokens/{id}.
type API struct {
	Service *Service
	// Kinds serve authentication-tokens/{id} for the token kinds other
	// domains own (auth.KindTeam, auth.KindAgent); others are 404s.
	Kinds map[auth.Kind]TokenKind
	// IncludeOrganization renders an organization for the admin users
	// list's ?include=organizations (nil: left out).
	IncludeOrganization func(r *http.Request, name string) (any, error)
}

// Register adds the routes to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/account/details", a.current)
	mux.HandleFunc("PATCH /api/v2/account/update", a.updateCurrent)
	mux.HandleFunc("GET /api/v2/users/{id}", a.get)
	mux.HandleFunc("GET /api/v2/users/{id}/authentication-tokens", a.listUserTokens)
	mux.HandleFunc("POST /api/v2/users/{id}/authentication-tokens", a.createUserToken)
	mux.HandleFunc("GET /api/v2/authentication-tokens/{id}", a.readToken)
	mux.HandleFunc("DELETE /api/v2/authentication-tokens/{id}", a.deleteToken)
	mux.HandleFunc("POST /api/v2/organizations/{org}/authentication-token", a.createOrgToken)
	mux.HandleFunc("GET /api/v2/organizations/{org}/authentication-token", a.readOrgToken)
	mux.HandleFunc("DELETE /api/v2/organizations/{org}/authentication-token", a.deleteOrgToken)
	a.registerAdmin(mux)
}

func (a *API) respondUser(w http.ResponseWriter, r *http.Request, u *auth.User) {
	tfeapi.Respond(w, r, http.StatusOK, UserJSON(r.Context(), u))
}

func (a *API) current(w http.ResponseWriter, r *http.Request) {
	u, err := a.Service.Current(r.Context())
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondUser(w, r, u)
}

func (a *API) updateCurrent(w http.ResponseWriter, r *http.Request) {
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	var opts UpdateOptions
	if err := doc.Attrs(&opts); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	u, err := a.Service.UpdateCurrent(r.Context(), opts)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondUser(w, r, u)
}

func (a *API) get(w http.ResponseWriter, r *http.Request) {
	u, err := a.Service.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.respondUser(w, r, u)
}

// userTokens is the user token kind.
func (a *API) userTokens() TokenKind {
	return TokenKind{Check: a.Service.CheckUserToken, Delete: a.Service.DeleteUserToken,
		JSON: func(ctx context.Context, t *auth.Token, secret string) *TokenJSON {
			return TokenToJSON(ctx, t, secret, a.Service.orgs.NameByID)
		}}
}

func (a *API) listUserTokens(w http.ResponseWriter, r *http.Request) {
	a.userTokens().List(w, r, func() ([]*auth.Token, error) { return a.Service.UserTokens(r.Context(), r.PathValue("id")) })
}

func (a *API) createUserToken(w http.ResponseWriter, r *http.Request) {
	a.userTokens().Create(w, r, func(attrs TokenAttrs) (*auth.Token, string, error) {
		return a.Service.CreateUserToken(r.Context(), r.PathValue("id"), attrs.Desc(), attrs.ExpiredAt)
	})
}

// kind is the token kind that serves t: another domain's, or the user
// token kind.
func (a *API) kind(t *auth.Token) TokenKind {
	if k, ok := a.Kinds[t.Kind]; ok && t.Kind != auth.KindUser {
		return k
	}
	return a.userTokens()
}

func (a *API) readToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Token(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.kind(t).Read(w, r, t)
}

func (a *API) deleteToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Token(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	a.kind(t).Remove(w, r, t)
}

func (a *API) createOrgToken(w http.ResponseWriter, r *http.Request) {
	a.userTokens().Create(w, r, func(attrs TokenAttrs) (*auth.Token, string, error) {
		return a.Service.CreateOrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token"), attrs.ExpiredAt)
	})
}

func (a *API) readOrgToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.OrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.userTokens().JSON(r.Context(), t, ""))
}

func (a *API) deleteOrgToken(w http.ResponseWriter, r *http.Request) {
	tfeapi.NoContent(w, r, a.Service.DeleteOrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token")))
}
