package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/signin"
	"github.com/terracehq/terrace/internal/ui"
)

// wireSignin builds browser sign-in: passwords, sessions, invitations
// (emailed through the notification mail server when there is one), OIDC
// single sign-on and the login.v1 flow of terraform login.
func (s *Server) wireSignin() error {
	secret, err := s.secret()
	if err != nil {
		return err
	}
	o := signin.Options{
		// The web UI's form token, keyed by the same secret as the UI's.
		CSRF: ui.NewCSRF(secret), Audit: s.Audit, Keys: s.Keys,
		DB: s.DB, Users: s.Auth, Tokens: s.Users, Memberships: s.Teams, BaseURL: s.BaseURL,
		Logger:      s.logger.With("component", "signin"),
		IdleTimeout: s.cfg.SessionIdleTimeout, Lifetime: s.cfg.SessionLifetime,
		OIDC: signin.OIDC{Issuer: s.cfg.OIDCIssuer, ClientID: s.cfg.OIDCClientID, ClientSecret: s.cfg.OIDCClientSecret,
			RedirectURL: s.cfg.OIDCRedirectURL, Name: s.cfg.OIDCName},
	}
	// Invitation links go by email whenever an SMTP server is enabled
	// (the site's settings, asked at each invitation); without one nothing
	// is sent and a site admin makes the link (`terrace user invite-link`).
	o.Mail = func(ctx context.Context, to, subject, body string) error {
		if err := s.Notify.SendMail(ctx, to, subject, body); !errors.Is(err, notify.ErrNoSMTP) {
			return err
		}
		return nil
	}
	if s.Signin, err = signin.NewService(o); err != nil {
		return err
	}
	s.Signin.Pages().SetCustomization(s.Settings.Customization)
	s.Teams.Invitations = s.Signin
	return nil
}

// signinRoutes mounts the sign-in pages and the login.v1 endpoints. A
// session resolves to a principal on /app paths only (Signin.Middleware);
// /api/v2 stays bearer-token only.
func (s *Server) signinRoutes(root *http.ServeMux) { s.Signin.Register(root) }
