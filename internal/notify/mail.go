package notify

import (
	"context"
	"errors"
)

// ErrNoSMTP is SendMail's answer when no mail server is configured.
var ErrNoSMTP = errors.New("no SMTP server is configured (--smtp-addr)")

// SendMail sends one plain-text email through the configured mail server
// (invitation links use it).
func (s *Service) SendMail(ctx context.Context, to, subject, text string) error {
	if s.o.SMTP == nil {
		return ErrNoSMTP
	}
	return s.smtpSend(ctx, []string{to}, mailBody{Subject: subject, Text: text})
}

// CanMail reports whether a mail server is configured.
func (s *Service) CanMail() bool { return s.o.SMTP != nil }
