package notify

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// SMTP is the mail server email destinations are sent through. A nil
// *SMTP in Options means none is configured: email configurations can be
// saved but not enabled.
type SMTP struct {
	// Addr is host:port of the server.
	Addr string
	// From is the sender address.
	From string
	// Auth is how the server is authenticated to: "plain" (PLAIN) or
	// "login" (LOGIN) with Username and Password, which are never sent
	// over an unencrypted connection except to localhost; anything else
	// sends none.
	Auth               string
	Username, Password string
	// TLSConfig is used for STARTTLS when the server offers it (nil: the
	// system roots, ServerName the host of Addr).
	TLSConfig *tls.Config
}

// UserEmails resolves user IDs to the email addresses notifications go
// to (users that no longer exist, and suspended users, are left out).
type UserEmails func(ctx context.Context, ids []string) ([]string, error)

// mailBody is what the outbox keeps for an email destination: the message
// without its recipients, which are resolved when it is sent (so a user's
// current address is used).
type mailBody struct {
	Subject string `json:"subject"`
	Text    string `json:"text"`
}

func emailBody(e Event) mailBody {
	var b strings.Builder
	if e.Trigger == verification {
		b.WriteString("This is a test email from Terrace: the notification configuration can send email.\n")
	} else {
		fmt.Fprintf(&b, "%s\n\n", e.title())
		if e.WorkspaceName != "" {
			fmt.Fprintf(&b, "Workspace: %s/%s\n", e.Organization, e.WorkspaceName)
		}
		if e.RunID != "" {
			fmt.Fprintf(&b, "Run: %s (%s)\n", e.RunID, e.RunStatus)
		}
		if e.RunMessage != "" {
			fmt.Fprintf(&b, "Message: %s\n", e.RunMessage)
		}
		if e.RunURL != "" {
			fmt.Fprintf(&b, "\n%s\n", e.RunURL)
		}
		fmt.Fprintf(&b, "\nTrigger: %s\n", e.Trigger)
	}
	return mailBody{Subject: "Terrace: " + e.title(), Text: b.String()}
}

// oneLine keeps header values to one line (no header injection).
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

// recipients are the configuration's addresses and its users' addresses.
func (s *Service) recipients(ctx context.Context, c *Configuration) ([]string, error) {
	to := slices.Clone(c.EmailAddresses)
	if len(c.EmailUserIDs) > 0 && s.o.UserEmails != nil {
		more, err := s.o.UserEmails(ctx, c.EmailUserIDs)
		if err != nil {
			return nil, err
		}
		to = append(to, more...)
	}
	slices.Sort(to)
	return slices.Compact(to), nil
}

// sendMail sends one email delivery through the SMTP server, bounded by
// Timeout. The response records the server's answer as HTTP answers are
// recorded (Code "250" on success); it never carries the password.
func (s *Service) sendMail(ctx context.Context, server *SMTP, c *Configuration, body []byte) Response {
	r := Response{URL: "smtp://" + server.Addr, SentAt: core.Now().Truncate(time.Second), Headers: map[string][]string{}}
	var m mailBody
	if err := json.Unmarshal(body, &m); err != nil {
		r.Body = "the queued email is unreadable: " + err.Error()
		return r
	}
	to, err := s.recipients(ctx, c)
	if err != nil {
		r.Body = "resolving the recipients: " + err.Error()
		return r
	}
	if len(to) == 0 {
		r.Code, r.Body, r.Successful = "250", "no recipients: nothing sent", true
		return r
	}
	r.Headers["to"] = to
	if err := s.smtpSend(ctx, server, to, m); err != nil {
		r.Body = err.Error()
		var te *textproto.Error
		if errors.As(err, &te) {
			r.Code = strconv.Itoa(te.Code)
		}
		return r
	}
	r.Code, r.Body, r.Successful = "250", "accepted for delivery", true
	return r
}

func (s *Service) smtpSend(ctx context.Context, cfg *SMTP, to []string, m mailBody) error {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return fmt.Errorf("smtp address %q: %w", cfg.Addr, err)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", cfg.Addr)
	if err != nil {
		return err
	}
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	cl, err := smtp.NewClient(conn, host)
	if err != nil {
		conn.Close()
		return err
	}
	defer cl.Close()
	if ok, _ := cl.Extension("STARTTLS"); ok {
		tc := cfg.TLSConfig
		if tc == nil {
			tc = &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}
		}
		if err := cl.StartTLS(tc); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	}
	var auth smtp.Auth
	switch cfg.Auth {
	case "plain":
		auth = smtp.PlainAuth("", cfg.Username, cfg.Password, host)
	case "login":
		auth = &loginAuth{username: cfg.Username, password: cfg.Password, host: host}
	}
	if auth != nil {
		if err := cl.Auth(auth); err != nil {
			return fmt.Errorf("authenticating as %s (%s): %w", cfg.Username, cfg.Auth, err)
		}
	}
	if err := cl.Mail(cfg.From); err != nil {
		return err
	}
	for _, addr := range to {
		if err := cl.Rcpt(addr); err != nil {
			return fmt.Errorf("recipient %s: %w", addr, err)
		}
	}
	w, err := cl.Data()
	if err != nil {
		return err
	}
	var msg bytes.Buffer
	fmt.Fprintf(&msg, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
		oneLine(cfg.From), oneLine(strings.Join(to, ", ")), oneLine(m.Subject), time.Now().UTC().Format(time.RFC1123Z))
	msg.WriteString(strings.ReplaceAll(strings.ReplaceAll(m.Text, "\r\n", "\n"), "\n", "\r\n"))
	if _, err := w.Write(msg.Bytes()); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return cl.Quit()
}

// loginAuth is the LOGIN mechanism (net/smtp has PLAIN and CRAM-MD5): the
// user name and password, each when the server asks. As net/smtp's
// PlainAuth, it sends them only over TLS or to localhost.
type loginAuth struct {
	username, password, host string
}

func (a *loginAuth) Start(server *smtp.ServerInfo) (string, []byte, error) {
	if !server.TLS && !isLocalhost(server.Name) {
		return "", nil, errors.New("unencrypted connection")
	}
	if server.Name != a.host {
		return "", nil, errors.New("wrong host name")
	}
	return "LOGIN", nil, nil
}

func (a *loginAuth) Next(challenge []byte, more bool) ([]byte, error) {
	if !more {
		return nil, nil
	}
	switch strings.ToLower(strings.TrimSpace(string(challenge))) {
	case "username:", "user name", "username":
		return []byte(a.username), nil
	case "password:", "password":
		return []byte(a.password), nil
	}
	return nil, fmt.Errorf("unexpected LOGIN challenge %q", challenge)
}

func isLocalhost(name string) bool {
	if name == "localhost" {
		return true
	}
	ip := net.ParseIP(name)
	return ip != nil && ip.IsLoopback()
}
