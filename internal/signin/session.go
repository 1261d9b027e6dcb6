package signin

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// CookieName is the session cookie. The __Host- prefix makes browsers
// refuse it unless it is Secure, host-only and for path /.
const CookieName = "__Host-terrace-session"

// StartSession stores a new session for the user and returns its secret
// (the cookie value); only its hash is kept.
func (s *Service) StartSession(ctx context.Context, userID string) (string, error) {
	secret := randomSecret()
	now := core.Now()
	_, err := s.db.Exec(ctx, `INSERT INTO sessions (id_hash, user_id, created_at, last_seen_at, expires_at) VALUES (?, ?, ?, ?, ?)`,
		hash(secret), userID, core.Micros(now), core.Micros(now), core.Micros(now.Add(s.opts.Lifetime)))
	if err != nil {
		return "", fmt.Errorf("starting a session for %s: %w", userID, err)
	}
	// Sessions nobody presents again are removed here rather than by a
	// background loop: each sign-in sweeps the expired ones.
	if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expires_at < ? OR last_seen_at < ?`,
		core.Micros(now), core.Micros(now.Add(-s.opts.IdleTimeout))); err != nil {
		return "", fmt.Errorf("removing expired sessions: %w", err)
	}
	return secret, nil
}

// setCookie starts a session and gives the browser its cookie.
func (s *Service) setCookie(ctx context.Context, w http.ResponseWriter, userID string) error {
	secret, err := s.StartSession(ctx, userID)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: secret, Path: "/", Secure: true, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, MaxAge: int(s.opts.Lifetime.Seconds())})
	return nil
}

func clearCookie(w http.ResponseWriter) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode, MaxAge: -1})
}

// SessionUser returns the user of a live session, refreshing its idle
// timer; an expired or unknown session is core.Unauthorized (and an
// expired one is deleted).
func (s *Service) SessionUser(ctx context.Context, secret string) (string, error) {
	var userID string
	var lastSeen, expires int64
	h := hash(secret)
	err := s.db.QueryRow(ctx, `SELECT user_id, last_seen_at, expires_at FROM sessions WHERE id_hash = ?`, h).Scan(&userID, &lastSeen, &expires)
	if store.IsNoRows(err) {
		return "", core.Unauthorized("no such session")
	}
	if err != nil {
		return "", fmt.Errorf("looking up a session: %w", err)
	}
	now := core.Now()
	if now.After(core.FromMicros(expires)) || now.Sub(core.FromMicros(lastSeen)) > s.opts.IdleTimeout {
		if _, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE id_hash = ?`, h); err != nil {
			return "", err
		}
		return "", core.Unauthorized("the session has expired")
	}
	// Record use at most once a minute so that page views stay reads.
	if now.Sub(core.FromMicros(lastSeen)) > time.Minute {
		if _, err := s.db.Exec(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?`, core.Micros(now), h); err != nil {
			return "", err
		}
	}
	return userID, nil
}

// EndSession deletes a session.
func (s *Service) EndSession(ctx context.Context, secret string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE id_hash = ?`, hash(secret))
	return err
}

// EndUserSessions deletes every session of a user.
func (s *Service) EndUserSessions(ctx context.Context, userID string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE user_id = ?`, userID)
	return err
}

// principal resolves the request's session cookie to its user's
// principal, or nil.
func (s *Service) principal(r *http.Request) *auth.Principal {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" {
		return nil
	}
	userID, err := s.SessionUser(r.Context(), c.Value)
	if err != nil {
		return nil
	}
	p, err := s.opts.Users.UserPrincipal(r.Context(), userID)
	if err != nil {
		return nil
	}
	return p
}

// Middleware puts the principal of the request's session (if any) in its
// context, for /app pages. It never answers by itself: pages that need a
// user redirect to the sign-in page (RequireUser).
func (s *Service) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := s.principal(r); p != nil {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// SignInURL is where a page sends a visitor with no session, to come back
// to next (a local path) afterwards.
func SignInURL(next string) string {
	return "/app/signin?next=" + urlQueryEscape(localPath(next))
}
