package signin

import (
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// A new API token's secret is shown once, on the page the token form
// redirects to (post, redirect, get: reloading that page creates nothing).
// It travels there in a one-time flash cookie rather than in a URL (which
// history, logs and referrers keep) or in one replica's memory (the
// redirect may reach another replica): sealed with the server's data key
// (seal.Keyring), bound to the session that made the token, HttpOnly,
// Secure, SameSite=Strict, living a minute, and cleared by the page that
// shows it, which no cache keeps (render's no-store).

const (
	// newTokenCookie holds the flash; __Host- makes browsers take it only
	// from this host, Secure, for path /.
	newTokenCookie = "__Host-terrace-new-token"
	// newTokenPurpose binds the sealed value to this use.
	newTokenPurpose = "signin.new-token-flash"
	// newTokenLifetime is how long the flash waits for its page.
	newTokenLifetime = time.Minute
)

func setNewTokenCookie(w http.ResponseWriter, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{Name: newTokenCookie, Value: value, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, MaxAge: maxAge})
}

// giveNewToken puts the secret of the token id just made in the flash
// cookie, and reports whether it did: without a keyring (tests without
// encryption at rest) or a session the caller shows the secret in the
// answer to the post instead.
func (s *Service) giveNewToken(w http.ResponseWriter, r *http.Request, id, secret string) bool {
	c, err := r.Cookie(CookieName)
	if s.opts.Keys == nil || err != nil || c.Value == "" {
		return false
	}
	sealed, err := s.opts.Keys.SealString(newTokenPurpose, strings.Join([]string{hash(c.Value), id,
		core.Now().Add(newTokenLifetime).Format(time.RFC3339Nano), secret}, " "))
	if err != nil {
		s.opts.Logger.Error("sealing a new token's flash", "err", err)
		return false
	}
	setNewTokenCookie(w, sealed, int(newTokenLifetime.Seconds()))
	return true
}

// newToken is a token just made and its secret, to show once.
type newToken struct{ ID, Secret string }

// takeNewToken returns the token the flash cookie brings (nil when none),
// and clears the cookie: the secret is shown once. It is taken only from
// the session that made the token, within its lifetime; showTokens shows
// it only for a token of the signed-in user that still exists (it lists
// them anyway).
func (s *Service) takeNewToken(w http.ResponseWriter, r *http.Request) *newToken {
	flash, err := r.Cookie(newTokenCookie)
	if err != nil {
		return nil
	}
	setNewTokenCookie(w, "", -1)
	session, err := r.Cookie(CookieName)
	if s.opts.Keys == nil || err != nil || !s.opts.Keys.IsSealed(newTokenPurpose, flash.Value) {
		return nil
	}
	plain, err := s.opts.Keys.OpenString(newTokenPurpose, flash.Value)
	if err != nil {
		return nil
	}
	f := strings.SplitN(plain, " ", 4)
	if len(f) != 4 || f[0] != hash(session.Value) {
		return nil
	}
	if until, err := time.Parse(time.RFC3339Nano, f[2]); err != nil || core.Now().After(until) {
		return nil
	}
	return &newToken{ID: f[1], Secret: f[3]}
}
