package signin

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/ui"
)

// Users is what sign-in needs from package auth.
type Users interface {
	GetUser(ctx context.Context, id string) (*auth.User, error)
	UserByName(ctx context.Context, username string) (*auth.User, error)
	UserByEmail(ctx context.Context, email string) (*auth.User, error)
	CreateUser(ctx context.Context, q store.Q, username, email string, siteAdmin bool) (*auth.User, error)
	UserPrincipal(ctx context.Context, userID string) (*auth.Principal, error)
}

// Tokens are a user's own API tokens (package user applies its rules: only
// the user itself, with the principal in ctx).
type Tokens interface {
	UserTokens(ctx context.Context, userID string) ([]*auth.Token, error)
	CreateUserToken(ctx context.Context, userID, description string, expiredAt *time.Time) (*auth.Token, string, error)
	Token(ctx context.Context, id string) (*auth.Token, error)
	DeleteUserToken(ctx context.Context, t *auth.Token) error
}

// Memberships activates an invited organization membership (package team).
type Memberships interface {
	ActivateMembership(ctx context.Context, q store.Q, id string) error
}

// Mailer sends one plain-text email.
type Mailer func(ctx context.Context, to, subject, body string) error

// OIDC configures single sign-on with an OpenID provider.
type OIDC struct {
	// Issuer is the provider's issuer URL (its discovery document is
	// <issuer>/.well-known/openid-configuration).
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL defaults to <base URL>/app/sso/callback.
	RedirectURL string
	// Name labels the sign-in button ("Sign in with <Name>").
	Name string
	// HTTPClient talks to the provider (http.DefaultClient when nil).
	HTTPClient *http.Client
}

// Options configure the service.
type Options struct {
	DB          *store.DB
	Users       Users
	Tokens      Tokens
	Memberships Memberships
	// Mail sends invitation links; without it a site admin makes them
	// with `terrace user invite-link` (InvitationLink).
	Mail Mailer
	// BaseURL is https://host:port, the start of every link.
	BaseURL string
	Logger  *slog.Logger
	// IdleTimeout ends a session unused this long (default 12h);
	// Lifetime ends any session this long after sign-in (default 7 days).
	IdleTimeout, Lifetime time.Duration
	// InvitationLifetime is how long an invitation link works (7 days).
	InvitationLifetime time.Duration
	// Hash are the argon2id parameters of new hashes (DefaultHashParams).
	Hash HashParams
	// AttemptsPerAccount and AttemptsPerAddress limit password attempts
	// per AttemptWindow (defaults 5 and 20 per 5 minutes), counted in the
	// store so that replicas share them.
	AttemptsPerAccount, AttemptsPerAddress int
	AttemptWindow                          time.Duration
	// OIDC enables single sign-on when its Issuer is set.
	OIDC OIDC
	// CSRF is the web UI's form-token protection (ui.NewCSRF with the
	// server's secret): every sign-in form carries its token.
	CSRF *ui.CSRF
	// Audit records sign-in events and token changes (none when nil).
	Audit Recorder
	// Keys seal what a single sign-on in progress keeps in the store (its
	// nonce and PKCE verifier); nil leaves them plain (tests without
	// encryption at rest).
	Keys *seal.Keyring
}

// Recorder puts what people do on the sign-in pages in the audit trail
// (package audit).
type Recorder interface {
	RecordSignin(r *http.Request, action, userID, username string, meta map[string]string)
	RecordPage(r *http.Request, org, apiPattern string, status int, values map[string]string, createdID string)
}

// Pages are the sign-in pages, rendered in the web UI's layout (for
// the server to have them show the site's customization).
func (s *Service) Pages() *ui.Pages { return s.pages }

// Service signs people in.
type Service struct {
	opts    Options
	db      *store.DB
	perUser *attemptLimiter
	perAddr *attemptLimiter
	sso     *ssoProvider
	pages   *ui.Pages
	csrf    *ui.CSRF
}

// NewService checks the options and returns the service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Users == nil || o.Tokens == nil || o.Memberships == nil {
		return nil, errors.New("signin: DB, Users, Tokens and Memberships are required")
	}
	if o.BaseURL == "" {
		return nil, errors.New("signin: BaseURL is required")
	}
	if o.CSRF == nil {
		return nil, errors.New("signin: the web UI's CSRF protection is required")
	}
	o.Logger = cmp.Or(o.Logger, slog.Default())
	o.IdleTimeout = cmp.Or(o.IdleTimeout, 12*time.Hour)
	o.Lifetime = cmp.Or(o.Lifetime, 7*24*time.Hour)
	o.InvitationLifetime = cmp.Or(o.InvitationLifetime, DefaultInvitationLifetime)
	if o.Hash == (HashParams{}) {
		o.Hash = DefaultHashParams
	}
	o.AttemptsPerAccount = cmp.Or(o.AttemptsPerAccount, 5)
	o.AttemptsPerAddress = cmp.Or(o.AttemptsPerAddress, 20)
	o.AttemptWindow = cmp.Or(o.AttemptWindow, 5*time.Minute)
	s := &Service{opts: o, db: o.DB, csrf: o.CSRF,
		perUser: &attemptLimiter{db: o.DB, kind: "account", limit: o.AttemptsPerAccount, window: o.AttemptWindow},
		perAddr: &attemptLimiter{db: o.DB, kind: "address", limit: o.AttemptsPerAddress, window: o.AttemptWindow},
	}
	if o.OIDC.Issuer != "" {
		if o.OIDC.ClientID == "" {
			return nil, errors.New("signin: an OIDC issuer needs a client ID")
		}
		o.OIDC.RedirectURL = cmp.Or(o.OIDC.RedirectURL, strings.TrimSuffix(o.BaseURL, "/")+"/app/sso/callback")
		o.OIDC.Name = cmp.Or(o.OIDC.Name, "single sign-on")
		s.opts.OIDC = o.OIDC
		s.sso = &ssoProvider{cfg: o.OIDC}
	}
	var err error
	if s.pages, err = ui.NewPages(templateFiles, o.Logger, pageNames...); err != nil {
		return nil, err
	}
	return s, nil
}

// Rejected counts sign-in attempts refused by the rate limits.
func (s *Service) Rejected() int64 { return s.perUser.rejected.Load() + s.perAddr.rejected.Load() }

// randomSecret returns 32 random bytes, base64url.
func randomSecret() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// hash is how every secret of this package is stored.
func hash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// --- passwords

// SetPassword sets a user's password and ends every session of the user.
func (s *Service) SetPassword(ctx context.Context, userID, password string) error {
	if _, err := s.opts.Users.GetUser(ctx, userID); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error { return s.setPassword(ctx, tx, userID, password) })
}

func (s *Service) setPassword(ctx context.Context, q store.Q, userID, password string) error {
	return storePassword(ctx, q, userID, password, s.opts.Hash, "")
}

// SetUserPassword sets a user's password and ends the user's sessions,
// straight in the store: `terrace user set-password` runs it without a
// server.
func SetUserPassword(ctx context.Context, db *store.DB, userID, password string) error {
	return db.Tx(ctx, func(tx *store.Tx) error { return storePassword(ctx, tx, userID, password, DefaultHashParams, "") })
}

// storePassword stores a new password hash and ends every session of the
// user but keep (the secret of the session changing it; "" for none).
func storePassword(ctx context.Context, q store.Q, userID, password string, params HashParams, keep string) error {
	if len([]rune(password)) < MinPasswordLength {
		return core.Invalid("a password needs at least %d characters", MinPasswordLength)
	}
	if len(password) > 1024 {
		return core.Invalid("a password may have at most 1024 bytes")
	}
	h, err := HashPassword(password, params)
	if err != nil {
		return err
	}
	now := core.Micros(core.Now())
	if _, err := q.Exec(ctx, `INSERT INTO user_passwords (user_id, hash, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (user_id) DO UPDATE SET hash = excluded.hash, updated_at = excluded.updated_at`, userID, h, now); err != nil {
		return fmt.Errorf("storing the password of %s: %w", userID, err)
	}
	keepHash := ""
	if keep != "" {
		keepHash = hash(keep)
	}
	if _, err := q.Exec(ctx, `DELETE FROM sessions WHERE user_id = ? AND id_hash <> ?`, userID, keepHash); err != nil {
		return fmt.Errorf("ending the sessions of %s: %w", userID, err)
	}
	return nil
}

// errBadCredentials is the one answer to a wrong username or password.
var errBadCredentials = core.Unauthorized("wrong username or password")

// errSuspended refuses to sign in a suspended user whose password was
// right (a site admin suspended the account: internal/user's admin API).
var errSuspended = core.Forbidden("this account is suspended")

// suspendedMessage tells a suspended user why signing in failed.
const suspendedMessage = "This account is suspended: ask a site administrator."

// tooMany is a refused attempt.
type tooMany struct{ wait time.Duration }

func (e tooMany) Error() string {
	return fmt.Sprintf("too many sign-in attempts: try again in %d seconds", int(e.wait.Seconds())+1)
}

// CheckPassword returns the user whose username (or email) and password
// match. Attempts are limited per account and per address (addr).
func (s *Service) CheckPassword(ctx context.Context, login, password, addr string) (*auth.User, error) {
	login = strings.TrimSpace(login)
	if err := s.perAddr.check(ctx, addr); err != nil {
		return nil, err
	}
	if err := s.perUser.check(ctx, strings.ToLower(login)); err != nil {
		return nil, err
	}
	u, err := s.opts.Users.UserByName(ctx, login)
	if core.KindOf(err) == core.KindNotFound && strings.Contains(login, "@") {
		u, err = s.opts.Users.UserByEmail(ctx, login)
	}
	var stored string
	if err == nil {
		err = s.db.QueryRow(ctx, `SELECT hash FROM user_passwords WHERE user_id = ?`, u.ID).Scan(&stored)
	}
	if err != nil && core.KindOf(err) != core.KindNotFound && !store.IsNoRows(err) {
		return nil, err
	}
	if stored == "" {
		// Spend the same time as a real check so that timing does not
		// tell which accounts exist.
		_, _ = HashPassword(password, s.opts.Hash)
		return nil, errBadCredentials
	}
	ok, err := VerifyPassword(password, stored)
	if err != nil {
		return nil, fmt.Errorf("checking the password of %s: %w", u.ID, err)
	}
	if !ok {
		return nil, errBadCredentials
	}
	if u.Suspended {
		return nil, errSuspended
	}
	return u, nil
}
