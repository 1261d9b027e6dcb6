package auth

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// User is a person (or the site admin) who signs in with user tokens.
type User struct {
	ID        string
	Username  string
	Email     string
	SiteAdmin bool
	CreatedAt time.Time
}

// CreateUser adds a user; a taken username is a conflict.
func (s *Service) CreateUser(ctx context.Context, q store.Q, username, email string, siteAdmin bool) (*User, error) {
	u := &User{ID: core.NewID(core.PrefixUser), Username: username, Email: email, SiteAdmin: siteAdmin, CreatedAt: core.Now()}
	_, err := q.Exec(ctx, `INSERT INTO users (id, username, email, is_site_admin, created_at) VALUES (?, ?, ?, ?, ?)`,
		u.ID, u.Username, u.Email, u.SiteAdmin, core.Micros(u.CreatedAt))
	if store.IsUniqueViolation(q, err) {
		return nil, core.Conflict("username %q is taken", username)
	}
	if err != nil {
		return nil, err
	}
	return u, nil
}

func scanUser(sc interface{ Scan(...any) error }) (*User, error) {
	var u User
	var created int64
	if err := sc.Scan(&u.ID, &u.Username, &u.Email, &u.SiteAdmin, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = core.FromMicros(created)
	return &u, nil
}

// GetUser returns a user by ID.
func (s *Service) GetUser(ctx context.Context, id string) (*User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT id, username, email, is_site_admin, created_at FROM users WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("user %s not found", id)
	}
	return u, err
}

// UserByName returns a user by username.
func (s *Service) UserByName(ctx context.Context, username string) (*User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT id, username, email, is_site_admin, created_at FROM users WHERE username = ?`, username))
	if store.IsNoRows(err) {
		return nil, core.NotFound("user %q not found", username)
	}
	return u, err
}

// UserByEmail returns a user by email address.
func (s *Service) UserByEmail(ctx context.Context, email string) (*User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT id, username, email, is_site_admin, created_at FROM users WHERE email = ? ORDER BY created_at LIMIT 1`, email))
	if store.IsNoRows(err) {
		return nil, core.NotFound("user with email %q not found", email)
	}
	return u, err
}

// EnsureSiteAdmin makes sure the site-admin user exists and that secret is
// one of its tokens.
func (s *Service) EnsureSiteAdmin(ctx context.Context, secret string) (*User, error) {
	u, err := s.UserByName(ctx, "admin")
	if core.KindOf(err) == core.KindNotFound {
		u, err = s.CreateUser(ctx, s.db, "admin", "admin@terrace.local", true)
	}
	if err != nil {
		return nil, err
	}
	return u, s.ImportToken(ctx, NewToken{Kind: KindUser, Subject: u.ID, Description: "site token"}, secret)
}
