package signin

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/httplimit"
)

// maxFormBytes bounds every form this package reads.
const maxFormBytes = 64 << 10

// Register adds the sign-in routes to mux. Every route resolves the session
// cookie itself (Middleware) and passes the web UI's CSRF protection:
// pages get the form token, and unsafe methods must be same-origin
// (net/http's CrossOriginProtection) and carry the token.
func (s *Service) Register(mux *http.ServeMux) {
	page := func(h http.HandlerFunc) http.Handler { return s.csrf.Middleware(s.Middleware(h)) }
	form := func(h http.HandlerFunc) http.Handler {
		return http.MaxBytesHandler(s.csrf.Middleware(s.Middleware(h)), maxFormBytes)
	}
	mux.Handle("GET /app/signin", page(s.signinForm))
	mux.Handle("POST /app/signin", form(s.signin))
	mux.Handle("POST /app/signout", form(s.signout))
	mux.Handle("GET /app/settings/tokens", page(s.tokensPage))
	mux.Handle("POST /app/settings/tokens", form(s.createToken))
	mux.Handle("POST /app/settings/tokens/{id}/delete", form(s.deleteToken))
	mux.Handle("GET /app/settings/password", page(s.settingsPage))
	mux.Handle("POST /app/settings/password", form(s.changePassword))
	mux.Handle("POST /app/settings/sessions/delete", form(s.signoutEverywhere))
	mux.Handle("GET /app/invitations/{token}", page(s.invitationPage))
	mux.Handle("POST /app/invitations/{token}", form(s.acceptInvitation))
	mux.Handle("GET /app/oauth/authorization", page(s.authorizePage))
	mux.Handle("POST /app/oauth/authorization", form(s.authorize))
	// The CLI posts here directly (no browser, no session, no form token:
	// the PKCE verifier proves the caller).
	mux.Handle("POST /app/oauth/token", http.MaxBytesHandler(http.HandlerFunc(s.token), maxFormBytes))
	mux.Handle("POST /app/sso/start", form(s.ssoStart))
	mux.Handle("GET /app/sso/callback", page(s.ssoCallback))
}

// requireUser returns the signed-in user, or sends the browser to the
// sign-in page and returns nil.
func requireUser(w http.ResponseWriter, r *http.Request) *auth.Principal {
	p := auth.FromContext(r.Context())
	if p.IsUser() {
		return p
	}
	http.Redirect(w, r, SignInURL(r.URL.RequestURI()), http.StatusSeeOther)
	return nil
}

type signinPage struct {
	page
	Next, Username, SSO string
}

func (s *Service) ssoName() string {
	if s.sso == nil {
		return ""
	}
	return s.opts.OIDC.Name
}

func (s *Service) signinForm(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if auth.FromContext(r.Context()).IsUser() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "signin", "Sign in", signinPage{Next: next, SSO: s.ssoName()})
}

func (s *Service) signin(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.message(w, r, http.StatusBadRequest, "Sign in", "The form could not be read: "+err.Error(), "/app/signin")
		return
	}
	next := localPath(r.PostFormValue("next"))
	login := r.PostFormValue("username")
	u, err := s.CheckPassword(r.Context(), login, r.PostFormValue("password"), httplimit.Address(r))
	if err != nil {
		status, msg := http.StatusUnauthorized, "Wrong username or password."
		var tm tooMany
		switch {
		case errors.As(err, &tm):
			status, msg = http.StatusTooManyRequests, "Too many sign-in attempts. "+tm.Error()+"."
			w.Header().Set("Retry-After", strconv.Itoa(int(tm.wait.Seconds())+1))
			s.recordAttempt(r, audit.SignInRefused, login)
		case errors.Is(err, errSuspended):
			status, msg = http.StatusForbidden, suspendedMessage
			s.recordAttempt(r, audit.SignInRefused, login)
		case core.KindOf(err) == core.KindUnauthorized:
			s.recordAttempt(r, audit.SignInFailed, login)
		default:
			s.opts.Logger.Error("checking a password", "err", err)
			status, msg = http.StatusInternalServerError, "Signing in failed; try again later."
		}
		s.render(w, r, status, "signin", "Sign in", signinPage{page: page{Error: msg}, Next: next, Username: login, SSO: s.ssoName()})
		return
	}
	if err := s.setCookie(r.Context(), w, u.ID); err != nil {
		s.opts.Logger.Error("starting a session", "err", err)
		s.message(w, r, http.StatusInternalServerError, "Sign in", "Signing in failed; try again later.", "")
		return
	}
	s.recordSignin(r, audit.SignIn, u.ID, u.Username, "password")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (s *Service) signout(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		if err := s.EndSession(r.Context(), c.Value); err != nil {
			s.opts.Logger.Error("ending a session", "err", err)
			s.message(w, r, http.StatusInternalServerError, "Sign out", "Signing out failed; try again.", "")
			return
		}
		if p := auth.FromContext(r.Context()); p.IsUser() {
			s.recordSignin(r, audit.SignOut, p.UserID, p.Username, "")
		}
	}
	clearCookie(w)
	http.Redirect(w, r, "/app/signin", http.StatusSeeOther)
}

type tokensPage struct {
	page
	Tokens []*tokenRow
	Secret string
	// Description is what the refused form was given.
	Description string
}

// tokenRow is a token as the page lists it.
type tokenRow struct {
	*auth.Token
	// Site marks the site token, which the server restores at every start.
	Site bool
}

// isSiteToken tells the site token: the one internal/server's siteToken
// imports at every start through auth.EnsureSiteAdmin (ImportToken: no
// creator, the description "site token"), from --site-token or
// <data-dir>/site-token. A token made through the API or this page always
// names its creator.
func isSiteToken(t *auth.Token) bool {
	return t.Kind == auth.KindUser && t.CreatedBy == "" && t.Description == "site token"
}

// maxDescription bounds a token's description, in characters.
const maxDescription = 255

func (s *Service) tokensPage(w http.ResponseWriter, r *http.Request) {
	if requireUser(w, r) == nil {
		return
	}
	s.showTokens(w, r, http.StatusOK, s.takeNewToken(w, r), "", "")
}

// showTokens lists the caller's tokens, with the secret of fresh (nil:
// none) when it is one of them.
func (s *Service) showTokens(w http.ResponseWriter, r *http.Request, status int, fresh *newToken, problem, description string) {
	p := requireUser(w, r)
	if p == nil {
		return
	}
	toks, err := s.opts.Tokens.UserTokens(r.Context(), p.UserID)
	if err != nil {
		s.opts.Logger.Error("listing user tokens", "err", err)
		s.message(w, r, http.StatusInternalServerError, "API tokens", "Your tokens could not be listed.", "")
		return
	}
	rows := make([]*tokenRow, len(toks))
	secret := ""
	for i, t := range toks {
		rows[i] = &tokenRow{Token: t, Site: isSiteToken(t)}
		if fresh != nil && t.ID == fresh.ID {
			secret = fresh.Secret
		}
	}
	s.render(w, r, status, "tokens", "API tokens", tokensPage{page: page{Error: problem}, Tokens: rows, Secret: secret, Description: description})
}

func (s *Service) createToken(w http.ResponseWriter, r *http.Request) {
	p := requireUser(w, r)
	if p == nil {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.showTokens(w, r, http.StatusBadRequest, nil, "The form could not be read: "+err.Error(), "")
		return
	}
	desc := r.PostFormValue("description")
	switch {
	case strings.TrimSpace(desc) == "":
		s.showTokens(w, r, http.StatusUnprocessableEntity, nil, "A token needs a description.", desc)
		return
	case utf8.RuneCountInString(desc) > maxDescription:
		s.showTokens(w, r, http.StatusUnprocessableEntity, nil, fmt.Sprintf("A token's description may have at most %d characters.", maxDescription), desc)
		return
	}
	tok, secret, err := s.opts.Tokens.CreateUserToken(r.Context(), p.UserID, desc, nil)
	if err != nil {
		s.showTokens(w, r, statusOf(err), nil, "The token could not be created: "+detail(err), desc)
		return
	}
	if s.opts.Audit != nil {
		s.opts.Audit.RecordPage(r, "", "POST /api/v2/users/{id}/authentication-tokens", http.StatusCreated, map[string]string{"id": p.UserID}, tok.ID)
	}
	// Post, redirect, get: reloading the page must not create another
	// token. The secret goes to the page that follows in a one-time flash
	// cookie (flash.go), never in a URL.
	if s.giveNewToken(w, r, tok.ID, secret) {
		http.Redirect(w, r, "/app/settings/tokens", http.StatusSeeOther)
		return
	}
	s.showTokens(w, r, http.StatusOK, &newToken{ID: tok.ID, Secret: secret}, "", "")
}

func (s *Service) deleteToken(w http.ResponseWriter, r *http.Request) {
	p := requireUser(w, r)
	if p == nil {
		return
	}
	t, err := s.opts.Tokens.Token(r.Context(), r.PathValue("id"))
	if err == nil {
		err = s.opts.Tokens.DeleteUserToken(r.Context(), t)
	}
	if err != nil {
		s.showTokens(w, r, statusOf(err), nil, "The token could not be revoked: "+detail(err), "")
		return
	}
	if s.opts.Audit != nil {
		s.opts.Audit.RecordPage(r, "", "DELETE /api/v2/authentication-tokens/{id}", http.StatusNoContent, map[string]string{"id": t.ID}, "")
	}
	http.Redirect(w, r, "/app/settings/tokens", http.StatusSeeOther)
}

// statusOf maps an error kind to an HTTP status for pages.
func statusOf(err error) int {
	switch core.KindOf(err) {
	case core.KindNotFound:
		return http.StatusNotFound
	case core.KindInvalid, core.KindBadRequest:
		return http.StatusUnprocessableEntity
	case core.KindUnauthorized:
		return http.StatusUnauthorized
	case core.KindForbidden:
		return http.StatusForbidden
	case core.KindConflict:
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

// detail is an error's message fit for a page: the detail of a classified
// error, or a generic sentence for an internal one.
func detail(err error) string {
	var ce *core.Error
	if errors.As(err, &ce) && ce.Kind != core.KindInternal {
		return ce.Detail
	}
	return "an internal error occurred"
}
