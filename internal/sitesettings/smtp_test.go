package sitesettings_test

import (
	"context"
	"database/sql"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/mailsink"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/sitesettings"
	"github.com/terracehq/terrace/internal/testenv"
)

// startSink starts a mail server for the test.
func startSink(t *testing.T, username, password string) *mailsink.Sink {
	t.Helper()
	var sink *mailsink.Sink
	var err error
	if username == "" {
		sink, err = mailsink.Start()
	} else {
		sink, err = mailsink.StartWithAuth(username, password)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sink.Close() })
	return sink
}

// next waits for the sink's next message.
func next(t *testing.T, sink *mailsink.Sink, what string) mailsink.Message {
	t.Helper()
	select {
	case m := <-sink.Messages:
		return m
	case <-time.After(15 * time.Second):
		t.Fatalf("%s: no email arrived", what)
	}
	return mailsink.Message{}
}

func hostPort(t *testing.T, addr string) (string, int) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

// TestSMTPSettings: the SMTP settings start as the --smtp-* flags say;
// set through the API (a test email going through them first) they
// replace the flags for every email Terrace sends; the password is kept
// sealed and never shown or logged; a test email that cannot be delivered,
// or bad input, is a 422 that changes nothing; disabled, no email goes.
func TestSMTPSettings(t *testing.T) {
	t.Parallel()
	for _, st := range testenv.Stores {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			const password = "pw-0f7c3e9d-never-shown"
			flagSink := startSink(t, "", "")
			authSink := startSink(t, "mailer", password)
			logs := &testenv.SyncBuffer{}
			e := testenv.New(t, testenv.Options{Store: st, SMTPAddr: flagSink.Addr, Configure: func(c *server.Config) {
				c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			}})
			ctx := context.Background()
			var bodies []string // every answer, none may hold the password
			call := func(method string, attrs map[string]any) (int, string) {
				t.Helper()
				var body any
				if attrs != nil {
					body = patch("smtp-settings", attrs)
				}
				status, out := e.API(t, "", method, "/api/v2/admin/smtp-settings", body)
				bodies = append(bodies, string(out))
				return status, string(out)
			}
			read := func() tfe.AdminSMTPSetting {
				t.Helper()
				s, err := e.Client.Admin.Settings.SMTP.Read(ctx)
				if err != nil {
					t.Fatal(err)
				}
				return *s
			}

			// The flags, as the settings show them.
			host, port := hostPort(t, flagSink.Addr)
			want := tfe.AdminSMTPSetting{ID: "smtp", Enabled: true, Host: host, Port: port, Sender: "terrace@localhost", Auth: tfe.SMTPAuthNone}
			if got := read(); got != want {
				t.Fatalf("settings from the flags = %+v, want %+v", got, want)
			}

			// Email goes through the flags' server until the settings change.
			testenv.NewOrg(t, e.Client, "acme")
			ws, err := e.Client.Workspaces.Create(ctx, "acme", tfe.WorkspaceCreateOptions{Name: tfe.String("w")})
			if err != nil {
				t.Fatal(err)
			}
			nc, err := e.Client.NotificationConfigurations.Create(ctx, ws.ID, tfe.NotificationConfigurationCreateOptions{
				DestinationType: tfe.NotificationDestination(tfe.NotificationDestinationTypeEmail), Enabled: tfe.Bool(true),
				Name: tfe.String("mail"), EmailAddresses: []string{"ops@acme.test"},
				Triggers: []tfe.NotificationTriggerType{tfe.NotificationTriggerCompleted},
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Client.NotificationConfigurations.Verify(ctx, nc.ID); err != nil {
				t.Fatal(err)
			}
			if m := next(t, flagSink, "a notification through the flags' server"); m.To[0] != "ops@acme.test" {
				t.Fatalf("the notification went to %v", m.To)
			}

			// A server that wants a password: the test email goes through
			// the new settings, authenticated, and then they are kept.
			host, port = hostPort(t, authSink.Addr)
			status, body := call("PATCH", map[string]any{"enabled": true, "host": host, "port": port, "sender": "terrace@acme.test",
				"auth": "plain", "username": "mailer", "password": password, "test-email-address": "admin@acme.test"})
			if status != http.StatusOK {
				t.Fatalf("setting an SMTP server with a password: %d %s", status, body)
			}
			m := next(t, authSink, "the test email")
			if m.Auth != "PLAIN" || len(m.To) != 1 || m.To[0] != "admin@acme.test" || m.From != "terrace@acme.test" || !strings.Contains(string(m.Data), "test email") {
				t.Fatalf("the test email: auth %q from %q to %v:\n%s", m.Auth, m.From, m.To, m.Data)
			}
			want = tfe.AdminSMTPSetting{ID: "smtp", Enabled: true, Host: host, Port: port, Sender: "terrace@acme.test", Auth: tfe.SMTPAuthPlain, Username: "mailer"}
			if got := read(); got != want {
				t.Fatalf("settings after the change = %+v, want %+v", got, want)
			}
			call("GET", nil)

			// Kept sealed.
			var secret sql.NullString
			if err := e.Server.DB.QueryRow(ctx, `SELECT secret FROM site_settings WHERE id = 'smtp'`).Scan(&secret); err != nil {
				t.Fatal(err)
			}
			if !secret.Valid || strings.Contains(secret.String, password) || !e.Server.Keys.IsSealed(sitesettings.SecretColumn.Purpose, secret.String) {
				t.Fatalf("the stored password is not sealed: %q", secret.String)
			}

			// Notifications now go through the new server; the flags' gets
			// nothing more.
			if _, err := e.Client.NotificationConfigurations.Verify(ctx, nc.ID); err != nil {
				t.Fatal(err)
			}
			if m := next(t, authSink, "a notification through the new settings"); m.Auth != "PLAIN" || m.To[0] != "ops@acme.test" {
				t.Fatalf("the notification: auth %q to %v", m.Auth, m.To)
			}

			// LOGIN, with the password kept from before (not sent again).
			status, body = call("PATCH", map[string]any{"auth": "login", "test-email-address": "admin@acme.test"})
			if status != http.StatusOK {
				t.Fatalf("switching to LOGIN: %d %s", status, body)
			}
			if m := next(t, authSink, "the test email with LOGIN"); m.Auth != "LOGIN" {
				t.Fatalf("the test email authenticated with %q, want LOGIN", m.Auth)
			}

			// Undeliverable test emails change nothing.
			closed, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			_, deadPort := hostPort(t, closed.Addr().String())
			closed.Close()
			before := read()
			for _, c := range []struct {
				attrs map[string]any
				want  string
			}{
				{map[string]any{"password": "wrong", "test-email-address": "admin@acme.test"}, "535"},
				{map[string]any{"auth": "none", "test-email-address": "admin@acme.test"}, "530"},
				{map[string]any{"port": deadPort, "test-email-address": "admin@acme.test"}, "connection refused"},
			} {
				status, body := call("PATCH", c.attrs)
				if status != http.StatusUnprocessableEntity || !strings.Contains(body, "could not be delivered") || !strings.Contains(body, c.want) {
					t.Errorf("PATCH %v: %d %s, want 422 saying the test email could not be delivered (%s)", c.attrs, status, body, c.want)
				}
			}
			if got := read(); got != before {
				t.Fatalf("refused changes changed the settings: %+v, want %+v", got, before)
			}
			// Still the right password: the notification still goes.
			if _, err := e.Client.NotificationConfigurations.Verify(ctx, nc.ID); err != nil {
				t.Fatal(err)
			}
			if m := next(t, authSink, "a notification after refused changes"); m.Auth != "LOGIN" {
				t.Fatalf("the notification authenticated with %q", m.Auth)
			}

			// Bad input.
			for _, c := range []struct {
				attrs map[string]any
				want  string
			}{
				{map[string]any{"auth": "plained"}, `auth must be "none", "plain" or "login", not "plained"`},
				{map[string]any{"port": 70000}, "port must be a TCP port"},
				{map[string]any{"port": "25"}, "port must be of type int"},
				{map[string]any{"sender": "not an address"}, "sender must be an email address"},
				{map[string]any{"sender": ""}, "sender is required when SMTP is enabled"},
				{map[string]any{"auth": "plain", "username": ""}, `username is required with auth "plain"`},
				{map[string]any{"test-email-address": "nobody"}, "test-email-address must be an email address"},
				{map[string]any{"tls": true}, "tls is not an SMTP setting"},
			} {
				status, body := call("PATCH", c.attrs)
				if status != http.StatusUnprocessableEntity || !strings.Contains(apiError(t, []byte(body)), c.want) {
					t.Errorf("PATCH %v: %d %s, want 422 saying %q", c.attrs, status, body, c.want)
				}
			}
			if got := read(); got != before {
				t.Fatalf("bad input changed the settings: %+v, want %+v", got, before)
			}

			// go-tfe's TestAdminSettings_SMTP_Update: disabled, nothing is
			// sent (so nothing is tested), and the notification cannot be
			// verified.
			if s, err := e.Client.Admin.Settings.SMTP.Update(ctx, tfe.AdminSMTPSettingsUpdateOptions{Enabled: tfe.Bool(false), Auth: tfe.SMTPAuthValue(tfe.SMTPAuthNone)}); err != nil || s.Enabled || s.Auth != tfe.SMTPAuthNone {
				t.Fatalf("disabling: %+v %v", s, err)
			}
			s, err := e.Client.Admin.Settings.SMTP.Update(ctx, tfe.AdminSMTPSettingsUpdateOptions{Enabled: tfe.Bool(false),
				TestEmailAddress: tfe.String("test@example.com"), Host: tfe.String("123"), Port: tfe.Int(123)})
			if err != nil || s.Enabled || s.Auth != tfe.SMTPAuthNone || s.Host != "123" || s.Port != 123 {
				t.Fatalf("a disabled change with a test address: %+v %v", s, err)
			}
			if _, err := e.Client.NotificationConfigurations.Verify(ctx, nc.ID); err == nil || !strings.Contains(err.Error(), "SMTP") {
				t.Fatalf("verifying an email notification with SMTP disabled: %v, want a refusal naming SMTP", err)
			}
			select {
			case m := <-authSink.Messages:
				t.Fatalf("an email went out with SMTP disabled: %s", m.Data)
			case m := <-flagSink.Messages:
				t.Fatalf("an email went to the flags' server: %s", m.Data)
			case <-time.After(200 * time.Millisecond):
			}

			for _, b := range bodies {
				if strings.Contains(b, password) {
					t.Fatalf("an answer shows the password: %s", b)
				}
			}
			e.Stop(t)
			if strings.Contains(logs.String(), password) {
				t.Fatal("the server's log shows the password")
			}
			if !strings.Contains(logs.String(), "level=") {
				t.Fatal("the server's log is empty: the check looks in the wrong place")
			}
		})
	}
}
