package user

import (
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// TokenHandler serves authentication-tokens/{id} for one token kind owned
// by another domain (team tokens, agent tokens).
type TokenHandler interface {
	ReadToken(w http.ResponseWriter, r *http.Request, t *auth.Token)
	DeleteToken(w http.ResponseWriter, r *http.Request, t *auth.Token)
}

// API serves the account, users, user tokens, organization tokens and
// authentication-tokens/{id}.
type API struct {
	Service *Service
	// Kinds serve authentication-tokens/{id} for the token kinds other
	// domains own (auth.KindTeam, auth.KindAgent); others are 404s.
	Kinds map[auth.Kind]TokenHandler
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
}

func (a *API) respondUser(w http.ResponseWriter, r *http.Request, u *auth.User) {
	p := auth.FromContext(r.Context())
	tfeapi.Respond(w, r, http.StatusOK, ToJSON(u, p.IsUser() && p.UserID == u.ID))
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

func (a *API) tokenJSON(r *http.Request, t *auth.Token, secret string) *TokenJSON {
	return TokenToJSON(r.Context(), t, secret, a.Service.orgs.NameByID)
}

type tokenAttrs struct {
	Description *string    `json:"description"`
	ExpiredAt   *time.Time `json:"expired-at"`
}

func decodeTokenAttrs(w http.ResponseWriter, r *http.Request) (tokenAttrs, error) {
	var attrs tokenAttrs
	doc, err := tfeapi.Decode(w, r, 0)
	if err != nil {
		return attrs, err
	}
	return attrs, doc.Attrs(&attrs)
}

func (a *API) listUserTokens(w http.ResponseWriter, r *http.Request) {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	toks, err := a.Service.UserTokens(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	items, pg := tfeapi.Paginate(toks, page)
	out := make([]*TokenJSON, len(items))
	for i, t := range items {
		out[i] = a.tokenJSON(r, t, "")
	}
	tfeapi.RespondList(w, r, out, pg)
}

func (a *API) createUserToken(w http.ResponseWriter, r *http.Request) {
	attrs, err := decodeTokenAttrs(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	desc := ""
	if attrs.Description != nil {
		desc = *attrs.Description
	}
	t, secret, err := a.Service.CreateUserToken(r.Context(), r.PathValue("id"), desc, attrs.ExpiredAt)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.tokenJSON(r, t, secret))
}

func (a *API) readToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Token(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if h := a.Kinds[t.Kind]; h != nil && t.Kind != auth.KindUser {
		h.ReadToken(w, r, t)
		return
	}
	if err := a.Service.CheckUserToken(r.Context(), t); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.tokenJSON(r, t, ""))
}

func (a *API) deleteToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.Token(r.Context(), r.PathValue("id"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	if h := a.Kinds[t.Kind]; h != nil && t.Kind != auth.KindUser {
		h.DeleteToken(w, r, t)
		return
	}
	if err := a.Service.DeleteUserToken(r.Context(), t); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (a *API) createOrgToken(w http.ResponseWriter, r *http.Request) {
	attrs, err := decodeTokenAttrs(w, r)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	t, secret, err := a.Service.CreateOrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token"), attrs.ExpiredAt)
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusCreated, a.tokenJSON(r, t, secret))
}

func (a *API) readOrgToken(w http.ResponseWriter, r *http.Request) {
	t, err := a.Service.OrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token"))
	if err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	tfeapi.Respond(w, r, http.StatusOK, a.tokenJSON(r, t, ""))
}

func (a *API) deleteOrgToken(w http.ResponseWriter, r *http.Request) {
	if err := a.Service.DeleteOrganizationToken(r.Context(), r.PathValue("org"), r.URL.Query().Get("token")); err != nil {
		tfeapi.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
