package auth

import (
	"context"
	"fmt"
	"strings"
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

// GetUsers returns the users with the given IDs, keyed by ID; unknown IDs
// are left out.
func (s *Service) GetUsers(ctx context.Context, ids []string) (map[string]*User, error) {
	out := make(map[string]*User, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, len(ids))
	marks := make([]string, len(ids))
	for i, id := range ids {
		args[i], marks[i] = id, "?"
	}
	rows, err := s.db.Query(ctx, `SELECT id, username, email, is_site_admin, created_at FROM users WHERE id IN (`+strings.Join(marks, ", ")+`)`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out[u.ID] = u
	}
	return out, rows.Err()
}

// UpdateUser changes a user's username and email; a taken username is
// invalid.
func (s *Service) UpdateUser(ctx context.Context, id, username, email string) (*User, error) {
	res, err := s.db.Exec(ctx, `UPDATE users SET username = ?, email = ? WHERE id = ?`, username, email, id)
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("username %q has already been taken", username)
	}
	if err != nil {
		return nil, fmt.Errorf("updating user %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, core.NotFound("user %s not found", id)
	}
	return s.GetUser(ctx, id)
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
		if core.KindOf(err) == core.KindConflict {
			// Another replica starting beside this one created it first.
			u, err = s.UserByName(ctx, "admin")
		}
	}
	if err != nil {
		return nil, err
	}
	return u, s.ImportToken(ctx, NewToken{Kind: KindUser, Subject: u.ID, Description: "site token"}, secret)
}
