// Package sitesettings keeps the site administrators' settings, Terraform
// Enterprise's admin settings API: the general settings
// (/api/v2/admin/general-settings) and the SMTP server notification
// emails go through (/api/v2/admin/smtp-settings). Site admins only: to
// everyone else both routes are not found.
//
// Each setting starts as the server's flag says (the per-token rate limit
// of --rate-limit, the SMTP server of --smtp-*) or as Terrace's default,
// and once a site admin sets it, the stored value replaces the flag's, on
// every replica. The store keeps only what was set (see migration 1093),
// so an attribute never set goes on following its flag.
//
// What each setting does, and who asks it:
//   - limit-user-organization-creation: the authorization model's
//     OrgCreate decision (authz), which the API, the UI and a user's
//     can-create-organizations all ask;
//   - api-rate-limiting-enabled and api-rate-limit: the per-token rate
//     limiter (internal/httplimit), which keeps the limit in memory: the
//     replica that changes it at once, the others when its wake-up
//     (Channel) reaches them, on PostgreSQL, or within a second on
//     SQLite (Service.Watch; no request reads the row);
//   - default-remote-state-access: global-remote-state of a workspace
//     created without one (internal/workspace);
//   - plan-timeout and apply-timeout: what a runner gives a plan or an
//     apply before it stops terraform and errors the run (internal/runner,
//     through the job's inputs);
//   - the SMTP settings: every email Terrace sends (notifications,
//     invitations) and, with test-email-address, one test email sent
//     through the new settings before they are kept.
//
// The other general settings describe what Terrace does not have
// (two-factor sign-in, fair run queuing, VCS integration, per-user and
// per-organization limits, build workers): they read false, 0 or "", a
// change asking for that is accepted, and any other is refused with a 422
// naming each attribute and why.
package sitesettings

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Group IDs: the rows of site_settings and the ids on the wire.
const (
	groupGeneral = "general"
	groupSMTP    = "smtp"
)

// Terrace's defaults where no flag gives one.
const (
	// DefaultTimeout is a plan's and an apply's time limit until a site
	// admin sets one (Terraform Enterprise's default, 2h).
	DefaultTimeout = "2h"
	// MinRateLimit is the least api-rate-limit a site admin may set
	// (Terraform Enterprise's rule), and the limit rate limiting turned on
	// without one uses when the flag gives none.
	MinRateLimit = 30
	// DefaultSMTPPort is the port shown before any SMTP server is set.
	DefaultSMTPPort = 25
)

// Auth types of the SMTP server, as go-tfe validates them.
const (
	AuthNone  = "none"
	AuthPlain = "plain"
	AuthLogin = "login"
)

// Defaults are the settings before a site admin sets them: the server's
// flags.
type Defaults struct {
	// RateLimit is the per-token API rate limit (--rate-limit, requests a
	// second; <= 0: none).
	RateLimit float64
	// Mail is the SMTP server of the --smtp-* flags (Enabled false: none).
	Mail Mail
}

// General are the general settings Terrace implements.
type General struct {
	// LimitUserOrganizationCreation: only site admins create
	// organizations.
	LimitUserOrganizationCreation bool
	// APIRateLimitingEnabled and APIRateLimit are the per-token rate
	// limit as the API shows it; Rate is the limit in force (requests a
	// second, 0: none), which follows the flag's value exactly while no
	// limit was set.
	APIRateLimitingEnabled bool
	APIRateLimit           int
	Rate                   float64
	// DefaultRemoteStateAccess is global-remote-state of a workspace
	// created without one.
	DefaultRemoteStateAccess bool
	// PlanTimeout and ApplyTimeout are the time limits as set (Go
	// durations: "2h", "30m"); PlanLimit and ApplyLimit are them parsed.
	PlanTimeout, ApplyTimeout string
	PlanLimit, ApplyLimit     time.Duration
}

// generalAttrs are the general settings a site admin has set (the attrs
// of the general row): nil is "never set".
type generalAttrs struct {
	LimitUserOrganizationCreation *bool   `json:"limit-user-organization-creation,omitempty"`
	APIRateLimitingEnabled        *bool   `json:"api-rate-limiting-enabled,omitempty"`
	APIRateLimit                  *int    `json:"api-rate-limit,omitempty"`
	DefaultRemoteStateAccess      *bool   `json:"default-remote-state-access,omitempty"`
	PlanTimeout                   *string `json:"plan-timeout,omitempty"`
	ApplyTimeout                  *string `json:"apply-timeout,omitempty"`
}

// general resolves the stored attributes over the defaults.
func (a generalAttrs) general(d Defaults) General {
	g := General{
		LimitUserOrganizationCreation: deref(a.LimitUserOrganizationCreation, false),
		APIRateLimitingEnabled:        deref(a.APIRateLimitingEnabled, d.RateLimit > 0),
		DefaultRemoteStateAccess:      deref(a.DefaultRemoteStateAccess, false),
		PlanTimeout:                   deref(a.PlanTimeout, DefaultTimeout),
		ApplyTimeout:                  deref(a.ApplyTimeout, DefaultTimeout),
	}
	rate := float64(MinRateLimit)
	if d.RateLimit > 0 {
		rate = d.RateLimit
	}
	if a.APIRateLimit != nil {
		rate = float64(*a.APIRateLimit)
	}
	g.APIRateLimit = int(rate + 0.5)
	if g.APIRateLimitingEnabled {
		g.Rate = rate
	}
	// Stored values were checked when set (ParseTimeout); a bad one
	// (written by hand) falls back to the default rather than to none.
	g.PlanLimit, g.PlanTimeout = timeoutOr(g.PlanTimeout)
	g.ApplyLimit, g.ApplyTimeout = timeoutOr(g.ApplyTimeout)
	return g
}

func timeoutOr(s string) (time.Duration, string) {
	if d, err := ParseTimeout(s); err == nil {
		return d, s
	}
	d, _ := time.ParseDuration(DefaultTimeout)
	return d, DefaultTimeout
}

func deref[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

// ParseTimeout reads a time limit of a plan or an apply: a positive Go
// duration. The site's limits and an organization's own are read alike.
func ParseTimeout(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("must be a positive duration such as \"2h\", \"30m\" or \"90s\", not %q", s)
	}
	return d, nil
}

// unsupported are the general settings Terrace has no feature for: the
// only value each may be set to (as JSON decodes it) and why.
var unsupported = map[string]struct {
	value any
	why   string
}{
	"send-passing-statuses-for-untriggered-speculative-plans": {false, "Terrace plans every pull request to a workspace's branch (file triggers do not apply to them), so none goes untriggered"},
	"allow-speculative-plans-on-pull-requests-from-forks":     {false, "Terrace never plans a pull request from a fork (its code would run with the workspace's variables and credentials)"},
	"require-two-factor-for-admins":                           {false, "Terrace has no two-factor sign-in"},
	"fair-run-queuing-enabled":                                {false, "Terrace has no fair run queuing"},
	"limit-organizations-per-user":                            {false, "Terrace does not limit the organizations a user creates"},
	"default-organizations-per-user-ceiling":                  {float64(0), "Terrace does not limit the organizations a user creates"},
	"limit-workspaces-per-organization":                       {false, "Terrace does not limit the workspaces of an organization"},
	"default-workspaces-per-organization-ceiling":             {float64(0), "Terrace does not limit the workspaces of an organization"},
	"terraform-build-worker-apply-timeout":                    {"", "Terrace has no build workers: apply-timeout limits applies"},
	"terraform-build-worker-plan-timeout":                     {"", "Terrace has no build workers: plan-timeout limits plans"},
}

// patchGeneral applies a PATCH's attributes (as sent) to the stored ones.
// null is "unchanged"; every refusal is collected (joined core.Invalid
// errors, one per attribute) and then nothing changes.
func patchGeneral(stored generalAttrs, attrs map[string]json.RawMessage) (generalAttrs, error) {
	var problems []error
	out := stored
	for _, name := range sortedKeys(attrs) {
		raw := attrs[name]
		if string(raw) == "null" {
			continue
		}
		bad := func(format string, args ...any) {
			problems = append(problems, core.Invalid("%s "+format, append([]any{name}, args...)...))
		}
		switch name {
		case "limit-user-organization-creation":
			out.LimitUserOrganizationCreation = decodeInto[bool](raw, bad, "a boolean")
		case "api-rate-limiting-enabled":
			out.APIRateLimitingEnabled = decodeInto[bool](raw, bad, "a boolean")
		case "default-remote-state-access":
			out.DefaultRemoteStateAccess = decodeInto[bool](raw, bad, "a boolean")
		case "api-rate-limit":
			if v := decodeInto[int](raw, bad, "an integer"); v != nil {
				if *v < MinRateLimit {
					bad("must be at least %d (requests a second for each token), not %d", MinRateLimit, *v)
				} else {
					out.APIRateLimit = v
				}
			}
		case "plan-timeout", "apply-timeout":
			v := decodeInto[string](raw, bad, "a string")
			if v == nil {
				continue
			}
			if _, err := ParseTimeout(*v); err != nil {
				bad("%v", err)
				continue
			}
			if name == "plan-timeout" {
				out.PlanTimeout = v
			} else {
				out.ApplyTimeout = v
			}
		default:
			fixed, ok := unsupported[name]
			if !ok {
				bad("is not a general setting Terrace has")
				continue
			}
			var v any
			if err := json.Unmarshal(raw, &v); err != nil || v != fixed.value {
				bad("cannot be %s (only %s): %s", raw, jsonText(fixed.value), fixed.why)
			}
		}
	}
	if len(problems) > 0 {
		return stored, errors.Join(problems...)
	}
	return out, nil
}

// decodeInto decodes raw as a T; a value of another type is reported to
// bad as "must be <what>" and gives nil.
func decodeInto[T any](raw json.RawMessage, bad func(string, ...any), what string) *T {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		bad("must be %s, not %s", what, raw)
		return nil
	}
	return &v
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Mail is the SMTP server Terrace sends email through.
type Mail struct {
	// Enabled: email is sent (false: none is).
	Enabled bool
	// Host and Port are the server's address; Sender the From address.
	Host   string
	Port   int
	Sender string
	// Auth is AuthNone, AuthPlain or AuthLogin, with Username and
	// Password (write-only: never shown, never logged).
	Auth     string
	Username string
	Password string
}

// Addr is host:port.
func (m Mail) Addr() string { return net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) }

// String shows the settings without the password (only whether there is
// one), so that a Mail printed or logged by mistake leaks nothing.
func (m Mail) String() string {
	return fmt.Sprintf("sitesettings.Mail{Enabled: %t, Host: %q, Port: %d, Sender: %q, Auth: %q, Username: %q, Password: %s}",
		m.Enabled, m.Host, m.Port, m.Sender, m.Auth, m.Username, redacted(m.Password != ""))
}

// GoString is String for %#v.
func (m Mail) GoString() string { return m.String() }

// LogValue is what slog writes for a Mail: String's fields.
func (m Mail) LogValue() slog.Value {
	return slog.GroupValue(slog.Bool("enabled", m.Enabled), slog.String("addr", m.Addr()), slog.String("sender", m.Sender),
		slog.String("auth", m.Auth), slog.String("username", m.Username), slog.String("password", redacted(m.Password != "")))
}

// redacted stands for a secret: whether it is set, never what it is.
func redacted(set bool) string {
	if set {
		return "[redacted]"
	}
	return `""`
}

// mailAttrs are the SMTP settings a site admin has set (the attrs of the
// smtp row; the password is the row's sealed secret).
type mailAttrs struct {
	Enabled  *bool   `json:"enabled,omitempty"`
	Host     *string `json:"host,omitempty"`
	Port     *int    `json:"port,omitempty"`
	Sender   *string `json:"sender,omitempty"`
	Auth     *string `json:"auth,omitempty"`
	Username *string `json:"username,omitempty"`
}

// mail resolves the stored attributes (and password: nil when never set)
// over the defaults.
func (a mailAttrs) mail(d Mail, password *string) Mail {
	m := Mail{
		Enabled:  deref(a.Enabled, d.Enabled),
		Host:     deref(a.Host, d.Host),
		Port:     deref(a.Port, d.Port),
		Sender:   deref(a.Sender, d.Sender),
		Auth:     deref(a.Auth, d.Auth),
		Username: deref(a.Username, d.Username),
		Password: deref(password, d.Password),
	}
	if m.Auth == "" {
		m.Auth = AuthNone
	}
	if m.Port == 0 && a.Port == nil {
		m.Port = DefaultSMTPPort
	}
	return m
}

// mailPatch is a PATCH of the SMTP settings as sent.
type mailPatch struct {
	Enabled          *bool   `json:"enabled"`
	Host             *string `json:"host"`
	Port             *int    `json:"port"`
	Sender           *string `json:"sender"`
	Auth             *string `json:"auth"`
	Username         *string `json:"username"`
	Password         *string `json:"password"`
	TestEmailAddress *string `json:"test-email-address"`
}

// String leaves the password out (see Mail.String).
func (p mailPatch) String() string {
	return fmt.Sprintf("sitesettings.mailPatch{Enabled: %s, Host: %s, Port: %s, Sender: %s, Auth: %s, Username: %s, Password: %s, TestEmailAddress: %s}",
		show(p.Enabled), show(p.Host), show(p.Port), show(p.Sender), show(p.Auth), show(p.Username),
		redacted(p.Password != nil && *p.Password != ""), show(p.TestEmailAddress))
}

// GoString is String for %#v.
func (p mailPatch) GoString() string { return p.String() }

// show is a patch's attribute as %q shows it, <nil> when absent.
func show[T any](v *T) string {
	if v == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", fmt.Sprint(*v))
}

// mailAttributes are the attributes a PATCH of the SMTP settings takes.
var mailAttributes = []string{"enabled", "host", "port", "sender", "auth", "username", "password", "test-email-address"}

// apply applies p to the stored attributes and password (nil: never set),
// and checks what results. A refusal names each attribute and why.
func (p mailPatch) apply(stored mailAttrs, password *string, d Mail) (mailAttrs, *string, Mail, error) {
	var problems []error
	bad := func(name, format string, args ...any) {
		problems = append(problems, core.Invalid("%s "+format, append([]any{name}, args...)...))
	}
	out := stored
	set := func(dst **string, v *string) {
		if v != nil {
			s := strings.TrimSpace(*v)
			*dst = &s
		}
	}
	if p.Enabled != nil {
		out.Enabled = p.Enabled
	}
	set(&out.Host, p.Host)
	set(&out.Sender, p.Sender)
	set(&out.Username, p.Username)
	if p.Auth != nil {
		switch *p.Auth {
		case AuthNone, AuthPlain, AuthLogin:
			out.Auth = p.Auth
		default:
			bad("auth", "must be %q, %q or %q, not %q", AuthNone, AuthPlain, AuthLogin, *p.Auth)
		}
	}
	if p.Port != nil {
		if *p.Port < 1 || *p.Port > 65535 {
			bad("port", "must be a TCP port (1 to 65535), not %d", *p.Port)
		} else {
			out.Port = p.Port
		}
	}
	if p.Password != nil {
		password = p.Password
	}
	m := out.mail(d, password)
	if m.Sender != "" {
		if _, err := mail.ParseAddress(m.Sender); err != nil {
			bad("sender", "must be an email address, not %q", m.Sender)
		}
	}
	if strings.ContainsAny(m.Host, " /\r\n") {
		bad("host", "must be a host name or IP address, not %q", m.Host)
	}
	if p.TestEmailAddress != nil {
		if _, err := mail.ParseAddress(*p.TestEmailAddress); err != nil {
			bad("test-email-address", "must be an email address, not %q", *p.TestEmailAddress)
		}
	}
	if m.Enabled {
		// Enabled settings must be complete: email is sent with them.
		if m.Host == "" {
			bad("host", "is required when SMTP is enabled")
		}
		if m.Sender == "" {
			bad("sender", "is required when SMTP is enabled")
		}
		if m.Auth != AuthNone && m.Username == "" {
			bad("username", "is required with auth %q", m.Auth)
		}
	}
	if len(problems) > 0 {
		return stored, nil, Mail{}, errors.Join(problems...)
	}
	return out, password, m, nil
}
