package notify

import (
	"context"
	"errors"
)

// ErrNoSMTP is SendMail's answer when no mail server is enabled.
var ErrNoSMTP = errors.New("no SMTP server is enabled (terrace server --smtp-addr, or a site admin's SMTP settings)")

// SendMail sends one plain-text email through the mail server in force
// (invitation links use it).
func (s *Service) SendMail(ctx context.Context, to, subject, text string) error {
	m, err := s.mailServer(ctx)
	if err != nil {
		return err
	}
	if m == nil {
		return ErrNoSMTP
	}
	return s.smtpSend(ctx, m, []string{to}, mailBody{Subject: subject, Text: text})
}

// SendTest sends a test email to to through m (SMTP settings a site admin
// is about to keep), bounded by the delivery timeout.
func (s *Service) SendTest(ctx context.Context, m *SMTP, to string) error {
	return s.smtpSend(ctx, m, []string{to}, mailBody{
		Subject: "Terrace: test email",
		Text:    "This is a test email from Terrace: the site's SMTP settings can send email.\n",
	})
}
