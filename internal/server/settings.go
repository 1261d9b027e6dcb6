package server

import (
	"context"
	"net"
	"strconv"

	"github.com/terracehq/terrace/internal/httplimit"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/sitesettings"
)

// wireSettings builds the site settings over the flags they start from.
// Called by New before the services that follow them: the authorization
// model (organization creation), workspaces (remote state default), the
// job protocol (time limits), notifications (the SMTP server) and, once
// they exist, the rate limiter (wireRateLimits).
func (s *Server) wireSettings() error {
	var err error
	s.Settings, err = sitesettings.NewService(sitesettings.Options{
		DB: s.DB, Keys: s.Keys, Logger: s.logger.With("component", "settings"),
		Defaults: sitesettings.Defaults{RateLimit: s.cfg.RateLimitPerToken, Mail: flagMail(s.cfg)},
		SendTest: func(ctx context.Context, m sitesettings.Mail, to string) error {
			return s.Notify.SendTest(ctx, smtpOf(m), to)
		},
	})
	return err
}

// flagMail is the SMTP server of the --smtp-* flags (check made sure
// --smtp-addr, when given, is host:port).
func flagMail(cfg Config) sitesettings.Mail {
	m := sitesettings.Mail{Sender: cfg.SMTPFrom, Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, Auth: sitesettings.AuthNone}
	if cfg.SMTPUsername != "" {
		m.Auth = sitesettings.AuthPlain
	}
	if host, port, err := net.SplitHostPort(cfg.SMTPAddr); err == nil {
		m.Enabled, m.Host = true, host
		m.Port, _ = strconv.Atoi(port)
	}
	return m
}

// smtpOf is the notify domain's mail server for SMTP settings.
func smtpOf(m sitesettings.Mail) *notify.SMTP {
	return &notify.SMTP{Addr: m.Addr(), From: m.Sender, Auth: m.Auth, Username: m.Username, Password: m.Password}
}

// mailServer is the SMTP server email goes through now (nil: none is
// enabled), for the notify domain.
func (s *Server) mailServer(ctx context.Context) (*notify.SMTP, error) {
	m, err := s.Settings.Mail(ctx)
	if err != nil || !m.Enabled {
		return nil, err
	}
	return smtpOf(m), nil
}

// wireRateLimits makes the rate limiters, the per-token one at the rate
// the site's settings give (the flag's until a site admin sets one), kept
// up to date by OnGeneral: at once on this replica, on the others when
// the change's wake-up reaches their "site-settings" loop. No request
// reads the store for it.
func (s *Server) wireRateLimits(ctx context.Context) error {
	g, err := s.Settings.General(ctx)
	if err != nil {
		return err
	}
	s.TokenLimits = httplimit.NewRateLimiter(g.Rate)
	s.AddressLimits = httplimit.NewRateLimiter(s.cfg.RateLimitPerAddress)
	s.Settings.OnGeneral(func(g sitesettings.General) { s.TokenLimits.SetRate(g.Rate) })
	return nil
}
