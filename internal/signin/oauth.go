package signin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The login.v1 service that discovery advertises: terraform login (and
// tofu login) run an OAuth 2.0 authorization-code flow with PKCE as the
// public client "terraform-cli", listening for the redirect on
// http://localhost:<port>/login with a port in LoginPorts.
const (
	LoginClientID = "terraform-cli"
	codeLifetime  = 5 * time.Minute
)

// LoginPorts are the first and last port the CLI may listen on.
var LoginPorts = [2]int{10000, 10010}

// loginRequest is a checked authorization request.
type loginRequest struct {
	ClientID, RedirectURI, State, Challenge string
}

// parseLoginRequest checks the parameters of an authorization request;
// redirectOK tells whether errors may be sent to the redirect URI.
func parseLoginRequest(q url.Values) (lr loginRequest, redirectOK bool, err error) {
	lr = loginRequest{ClientID: q.Get("client_id"), RedirectURI: q.Get("redirect_uri"), State: q.Get("state"), Challenge: q.Get("code_challenge")}
	if lr.ClientID != LoginClientID {
		return lr, false, core.Invalid("unknown client_id %q: only %s may ask for a token here", lr.ClientID, LoginClientID)
	}
	if err := checkRedirect(lr.RedirectURI); err != nil {
		return lr, false, err
	}
	if q.Get("response_type") != "code" {
		return lr, true, core.Invalid("response_type must be code")
	}
	if q.Get("code_challenge_method") != "S256" || len(lr.Challenge) < 43 || len(lr.Challenge) > 128 {
		return lr, true, core.Invalid("a PKCE code_challenge with code_challenge_method S256 is required")
	}
	return lr, true, nil
}

// checkRedirect accepts only the CLI's own listener: http on the loopback
// interface, a port in LoginPorts.
func checkRedirect(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "http" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return core.Invalid("redirect_uri %q is not the CLI's http://localhost:<port>/ listener", raw)
	}
	host, portText, err := net.SplitHostPort(u.Host)
	port, perr := strconv.Atoi(portText)
	if err != nil || perr != nil || (host != "localhost" && host != "127.0.0.1" && host != "::1") || port < LoginPorts[0] || port > LoginPorts[1] {
		return core.Invalid("redirect_uri %q must be http://localhost with a port from %d to %d", raw, LoginPorts[0], LoginPorts[1])
	}
	return nil
}

type authorizePage struct {
	page
	Client, RedirectURI string
	Params              map[string]string
}

func (s *Service) authorizePage(w http.ResponseWriter, r *http.Request) {
	lr, _, err := parseLoginRequest(r.URL.Query())
	if err != nil {
		// Never redirect anywhere on a bad request: say what is wrong.
		s.message(w, r, http.StatusBadRequest, "Authorize the CLI", detail(err), "")
		return
	}
	p := requireUser(w, r)
	if p == nil {
		return
	}
	params := map[string]string{"client_id": lr.ClientID, "redirect_uri": lr.RedirectURI, "state": lr.State,
		"code_challenge": lr.Challenge, "code_challenge_method": "S256", "response_type": "code"}
	s.render(w, r, http.StatusOK, "authorize", "Authorize the CLI", authorizePage{Client: "terraform", RedirectURI: lr.RedirectURI, Params: params})
}

func (s *Service) authorize(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.message(w, r, http.StatusBadRequest, "Authorize the CLI", "The form could not be read.", "")
		return
	}
	lr, _, err := parseLoginRequest(r.PostForm)
	if err != nil {
		s.message(w, r, http.StatusBadRequest, "Authorize the CLI", detail(err), "")
		return
	}
	p := requireUser(w, r)
	if p == nil {
		return
	}
	back, _ := url.Parse(lr.RedirectURI)
	q := url.Values{}
	if lr.State != "" {
		q.Set("state", lr.State)
	}
	if r.PostFormValue("decision") != "allow" {
		q.Set("error", "access_denied")
		back.RawQuery = q.Encode()
		http.Redirect(w, r, back.String(), http.StatusSeeOther)
		return
	}
	code := randomSecret()
	_, err = s.db.Exec(r.Context(), `INSERT INTO oauth_codes (code_hash, user_id, client_id, redirect_uri, code_challenge, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		hash(code), p.UserID, lr.ClientID, lr.RedirectURI, lr.Challenge, core.Micros(core.Now().Add(codeLifetime)))
	if err != nil {
		s.opts.Logger.Error("storing an authorization code", "err", err)
		s.message(w, r, http.StatusInternalServerError, "Authorize the CLI", "The authorization failed; try again.", "")
		return
	}
	// Codes never redeemed are swept by the next authorization.
	if _, err := s.db.Exec(r.Context(), `DELETE FROM oauth_codes WHERE expires_at < ?`, core.Micros(core.Now())); err != nil {
		s.opts.Logger.Warn("removing expired authorization codes", "err", err)
	}
	q.Set("code", code)
	back.RawQuery = q.Encode()
	http.Redirect(w, r, back.String(), http.StatusSeeOther)
}

// tokenError answers the token endpoint as RFC 6749 section 5.2 says.
func tokenError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

// token exchanges an authorization code (once) for a new user token.
func (s *Service) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", "the form could not be read")
		return
	}
	f := r.PostForm
	if f.Get("grant_type") != "authorization_code" {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "only authorization_code is supported")
		return
	}
	if f.Get("client_id") != LoginClientID {
		tokenError(w, http.StatusUnauthorized, "invalid_client", "unknown client_id")
		return
	}
	code, verifier := f.Get("code"), f.Get("code_verifier")
	if code == "" || len(verifier) < 43 || len(verifier) > 128 {
		tokenError(w, http.StatusBadRequest, "invalid_request", "code and a PKCE code_verifier of 43 to 128 characters are required")
		return
	}
	ctx := r.Context()
	var userID, clientID, redirectURI, challenge string
	var expires int64
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		err := tx.QueryRow(ctx, `SELECT user_id, client_id, redirect_uri, code_challenge, expires_at FROM oauth_codes WHERE code_hash = ?`, hash(code)).
			Scan(&userID, &clientID, &redirectURI, &challenge, &expires)
		if err != nil {
			return err
		}
		// A code is used once, whatever the outcome.
		_, err = tx.Exec(ctx, `DELETE FROM oauth_codes WHERE code_hash = ?`, hash(code))
		return err
	})
	if store.IsNoRows(err) {
		tokenError(w, http.StatusBadRequest, "invalid_grant", "the authorization code is unknown or was already used")
		return
	}
	if err != nil {
		s.opts.Logger.Error("redeeming an authorization code", "err", err)
		tokenError(w, http.StatusInternalServerError, "server_error", "the code could not be redeemed")
		return
	}
	sum := sha256.Sum256([]byte(verifier))
	switch {
	case core.Now().After(core.FromMicros(expires)):
		tokenError(w, http.StatusBadRequest, "invalid_grant", "the authorization code has expired")
		return
	case clientID != f.Get("client_id") || redirectURI != f.Get("redirect_uri"):
		tokenError(w, http.StatusBadRequest, "invalid_grant", "client_id or redirect_uri differ from the authorization request")
		return
	case subtle.ConstantTimeCompare([]byte(base64.RawURLEncoding.EncodeToString(sum[:])), []byte(challenge)) != 1:
		tokenError(w, http.StatusBadRequest, "invalid_grant", "the code_verifier does not match the code_challenge")
		return
	}
	p, err := s.opts.Users.UserPrincipal(ctx, userID)
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_grant", "the user no longer exists")
		return
	}
	t, secret, err := s.opts.Tokens.CreateUserToken(auth.WithPrincipal(ctx, p), userID, "terraform login", nil)
	if err != nil {
		s.opts.Logger.Error("creating a token for terraform login", "err", err)
		tokenError(w, http.StatusInternalServerError, "server_error", "the token could not be created")
		return
	}
	if s.opts.Audit != nil {
		// As the user's own token request through the API would be.
		s.opts.Audit.RecordPage(r.WithContext(auth.WithPrincipal(ctx, p)), "", "POST /api/v2/users/{id}/authentication-tokens", http.StatusCreated, map[string]string{"id": userID}, t.ID)
	}
	resp := map[string]any{"access_token": secret, "token_type": "bearer"}
	if t.ExpiredAt != nil {
		resp["expires_in"] = int(time.Until(*t.ExpiredAt).Seconds())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(resp)
}
