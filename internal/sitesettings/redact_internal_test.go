package sitesettings

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestMailNeverShowsItsPassword: a Mail or a PATCH of it printed or
// logged by mistake shows every other setting and whether a password is
// set, never the password.
func TestMailNeverShowsItsPassword(t *testing.T) {
	const password = "hunter2-smtp-secret"
	m := Mail{Enabled: true, Host: "smtp.acme.test", Port: 587, Sender: "terrace@acme.test", Auth: AuthPlain, Username: "mailer", Password: password}
	user, pass := "mailer", password
	p := mailPatch{Username: &user, Password: &pass}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("smtp", "mail", m, "ptr", &m)
	slog.New(slog.NewJSONHandler(&logged, nil)).Info("smtp", "mail", m)
	shown := map[string]string{
		"%v": fmt.Sprintf("%v", m), "%+v": fmt.Sprintf("%+v", m), "%#v": fmt.Sprintf("%#v", m), "%v of a pointer": fmt.Sprintf("%v", &m),
		"a PATCH %v": fmt.Sprintf("%v", p), "a PATCH %#v": fmt.Sprintf("%#v", p), "slog": logged.String(),
	}
	for how, s := range shown {
		if strings.Contains(s, password) {
			t.Errorf("%s shows the password: %s", how, s)
		}
		if !strings.Contains(s, "mailer") || !strings.Contains(s, "[redacted]") {
			t.Errorf("%s hides the username or that a password is set: %s", how, s)
		}
	}
	for how, s := range map[string]string{"%v": fmt.Sprint(m), "slog": logged.String()} {
		if !strings.Contains(s, "smtp.acme.test") {
			t.Errorf("%s leaves out the host: %s", how, s)
		}
	}
	if s := fmt.Sprint(Mail{Host: "h"}); strings.Contains(s, "[redacted]") {
		t.Errorf("a Mail without a password shows one: %s", s)
	}
}
