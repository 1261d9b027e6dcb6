package signin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/zitadel/oidc/v3/pkg/client/rp"
	"github.com/zitadel/oidc/v3/pkg/oidc"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ssoProvider is the OpenID provider, discovered on first use (so that a
// provider down at start-up does not stop the server).
type ssoProvider struct {
	cfg OIDC
	mu  sync.Mutex
	rp  rp.RelyingParty
}

type nonceKey struct{}

func (p *ssoProvider) get(ctx context.Context) (rp.RelyingParty, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rp != nil {
		return p.rp, nil
	}
	opts := []rp.Option{rp.WithVerifierOpts(rp.WithNonce(func(ctx context.Context) string {
		n, _ := ctx.Value(nonceKey{}).(string)
		return n
	}))}
	if p.cfg.HTTPClient != nil {
		opts = append(opts, rp.WithHTTPClient(p.cfg.HTTPClient))
	}
	r, err := rp.NewRelyingPartyOIDC(ctx, p.cfg.Issuer, p.cfg.ClientID, p.cfg.ClientSecret, p.cfg.RedirectURL,
		[]string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile}, opts...)
	if err != nil {
		return nil, fmt.Errorf("discovering the OpenID provider %s: %w", p.cfg.Issuer, err)
	}
	p.rp = r
	return r, nil
}

// ssoStateLifetime is how long a sign-in at the provider may take.
const ssoStateLifetime = 10 * time.Minute

// The purposes under which a sign-in in progress seals its nonce and PKCE
// verifier in oidc_states: whoever reads the store cannot redeem a code the
// provider hands out while the sign-in runs.
const (
	oidcNoncePurpose    = "oidc_states.nonce"
	oidcVerifierPurpose = "oidc_states.code_verifier"
)

// ssoStart sends the browser to the provider with a fresh state, nonce and
// PKCE challenge; the state's hash keys what the callback needs.
func (s *Service) ssoStart(w http.ResponseWriter, r *http.Request) {
	if s.sso == nil {
		s.message(w, r, http.StatusNotFound, "Single sign-on", "Single sign-on is not configured on this server.", "/app/signin")
		return
	}
	ctx := r.Context()
	provider, err := s.sso.get(ctx)
	if err != nil {
		s.opts.Logger.Error("single sign-on", "err", err)
		s.message(w, r, http.StatusBadGateway, "Single sign-on", "The identity provider cannot be reached; try again later or sign in with a password.", "/app/signin")
		return
	}
	state, nonce, verifier := randomSecret(), randomSecret(), randomSecret()
	err = s.storeSSOState(ctx, state, nonce, verifier, localPath(r.PostFormValue("next")), r.PostFormValue("invitation"))
	if err != nil {
		s.opts.Logger.Error("storing an OIDC state", "err", err)
		s.message(w, r, http.StatusInternalServerError, "Single sign-on", "Single sign-on failed; try again.", "/app/signin")
		return
	}
	_, _ = s.db.Exec(ctx, `DELETE FROM oidc_states WHERE expires_at < ?`, core.Micros(core.Now()))
	http.Redirect(w, r, rp.AuthURL(state, provider, rp.WithCodeChallenge(oidc.NewSHACodeChallenge(verifier)), rp.AuthURLOpt(rp.WithURLParam("nonce", nonce))), http.StatusFound)
}

// storeSSOState keeps what the callback of a sign-in needs, keyed by the
// state's hash, with the nonce and PKCE verifier sealed.
func (s *Service) storeSSOState(ctx context.Context, state, nonce, verifier, next, invitation string) error {
	sealedNonce, err := s.opts.Keys.SealString(oidcNoncePurpose, nonce)
	if err != nil {
		return err
	}
	sealedVerifier, err := s.opts.Keys.SealString(oidcVerifierPurpose, verifier)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `INSERT INTO oidc_states (state_hash, nonce, code_verifier, next_path, invitation, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		hash(state), sealedNonce, sealedVerifier, next, invitation, core.Micros(core.Now().Add(ssoStateLifetime)))
	return err
}

// ssoCallback redeems the provider's code, checks the ID token (signature,
// audience, nonce) and signs in the user with the verified email address,
// creating one when none has it.
func (s *Service) ssoCallback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string) {
		s.message(w, r, status, "Single sign-on", msg, "/app/signin")
	}
	if s.sso == nil {
		fail(http.StatusNotFound, "Single sign-on is not configured on this server.")
		return
	}
	ctx := r.Context()
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		fail(http.StatusUnauthorized, "The identity provider refused the sign-in: "+e+" "+q.Get("error_description"))
		return
	}
	var nonce, verifier, next, invite string
	var expires int64
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		err := tx.QueryRow(ctx, `SELECT nonce, code_verifier, next_path, invitation, expires_at FROM oidc_states WHERE state_hash = ?`, hash(q.Get("state"))).
			Scan(&nonce, &verifier, &next, &invite, &expires)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM oidc_states WHERE state_hash = ?`, hash(q.Get("state")))
		if err != nil {
			return err
		}
		if nonce, err = s.opts.Keys.OpenString(oidcNoncePurpose, nonce); err != nil {
			return err
		}
		verifier, err = s.opts.Keys.OpenString(oidcVerifierPurpose, verifier)
		return err
	})
	if store.IsNoRows(err) || (err == nil && core.Now().After(core.FromMicros(expires))) {
		fail(http.StatusBadRequest, "This sign-in is unknown or took too long; start again.")
		return
	}
	if err != nil {
		s.opts.Logger.Error("reading an OIDC state", "err", err)
		fail(http.StatusInternalServerError, "Single sign-on failed; try again.")
		return
	}
	provider, err := s.sso.get(ctx)
	if err != nil {
		s.opts.Logger.Error("single sign-on", "err", err)
		fail(http.StatusBadGateway, "The identity provider cannot be reached; try again later.")
		return
	}
	tokens, err := rp.CodeExchange[*oidc.IDTokenClaims](context.WithValue(ctx, nonceKey{}, nonce), q.Get("code"), provider, rp.WithCodeVerifier(verifier))
	if err != nil {
		s.opts.Logger.Warn("OIDC code exchange", "err", err)
		fail(http.StatusUnauthorized, "The identity provider's answer could not be verified.")
		return
	}
	email, verified := tokens.IDTokenClaims.Email, bool(tokens.IDTokenClaims.EmailVerified)
	if email == "" && provider.UserinfoEndpoint() != "" {
		info, err := rp.Userinfo[*oidc.UserInfo](ctx, tokens.AccessToken, tokens.TokenType, tokens.IDTokenClaims.Subject, provider)
		if err != nil {
			s.opts.Logger.Warn("OIDC userinfo", "err", err)
			fail(http.StatusBadGateway, "The identity provider's user information could not be read.")
			return
		}
		email, verified = info.Email, bool(info.EmailVerified)
	}
	if email == "" || !verified {
		fail(http.StatusForbidden, "The identity provider did not give a verified email address, which Terrace needs to know who you are.")
		return
	}
	u, err := s.ssoUser(ctx, email, tokens.IDTokenClaims.PreferredUsername)
	if err != nil {
		s.opts.Logger.Error("matching an OIDC user", "err", err)
		fail(statusOf(err), "Single sign-on failed: "+detail(err))
		return
	}
	if u.Suspended {
		// Refused as a password sign-in is, and recorded the same way.
		s.recordSignin(r, audit.SignInRefused, u.ID, u.Username, "oidc")
		fail(http.StatusForbidden, suspendedMessage)
		return
	}
	if invite != "" {
		inv, err := s.lookupInvitation(ctx, invite)
		if err != nil {
			fail(statusOf(err), detail(err))
			return
		}
		if inv.UserID != u.ID {
			fail(http.StatusForbidden, "This invitation was sent to another email address than the one your identity provider gave.")
			return
		}
		if err := s.db.Tx(ctx, func(tx *store.Tx) error { return s.accept(ctx, tx, inv) }); err != nil {
			fail(statusOf(err), detail(err))
			return
		}
	}
	if err := s.setCookie(ctx, w, u.ID); err != nil {
		s.opts.Logger.Error("starting a session", "err", err)
		fail(http.StatusInternalServerError, "Signing in failed; try again.")
		return
	}
	s.recordSignin(r, audit.SignIn, u.ID, u.Username, "oidc")
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// ssoUser returns the user with the email address, creating one (named
// after the provider's preferred username or the address) when none has it.
func (s *Service) ssoUser(ctx context.Context, email, preferred string) (*auth.User, error) {
	u, err := s.opts.Users.UserByEmail(ctx, email)
	if core.KindOf(err) != core.KindNotFound {
		return u, err
	}
	base := usernameFrom(preferred)
	if base == "" {
		base = usernameFrom(strings.SplitN(email, "@", 2)[0])
	}
	if base == "" {
		base = "user"
	}
	name := base
	for range 10 {
		u, err := s.opts.Users.CreateUser(ctx, s.db, name, email, false)
		if core.KindOf(err) != core.KindConflict {
			return u, err
		}
		name = base + "-" + strings.ToLower(core.RandomString(6))
	}
	return nil, fmt.Errorf("no free username for %s", email)
}

// usernameFrom keeps the characters a username may have.
func usernameFrom(s string) string {
	s, _, _ = strings.Cut(s, "@")
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteRune('-')
		}
	}
	out := strings.Trim(b.String(), "-_")
	if len(out) > 40 {
		out = out[:40]
	}
	return out
}
