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
	// Suspended users keep their account, but none of their tokens or
	// sessions is accepted (a site admin's decision, the admin API).
	Suspended bool
	CreatedAt time.Time
}

// userCols are the columns scanUser reads.
const userCols = `id, username, email, is_site_admin, is_suspended, created_at`

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
	if err := sc.Scan(&u.ID, &u.Username, &u.Email, &u.SiteAdmin, &u.Suspended, &created); err != nil {
		return nil, err
	}
	u.CreatedAt = core.FromMicros(created)
	return &u, nil
}

// GetUser returns a user by ID.
func (s *Service) GetUser(ctx context.Context, id string) (*User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = ?`, id))
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
	rows, err := s.db.Query(ctx, `SELECT `+userCols+` FROM users WHERE id IN (`+strings.Join(marks, ", ")+`)`, args...)
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

// NotifiedEmails returns the email addresses of those of the users with
// the given IDs whom notifications are sent to: users that exist, have an
// address and are not suspended (a suspended account gets no mail about
// its organizations' work until a site admin unsuspends it).
func (s *Service) NotifiedEmails(ctx context.Context, ids []string) ([]string, error) {
	users, err := s.GetUsers(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(users))
	for _, u := range users {
		if u.Email != "" && !u.Suspended {
			out = append(out, u.Email)
		}
	}
	return out, nil
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
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE username = ?`, username))
	if store.IsNoRows(err) {
		return nil, core.NotFound("user %q not found", username)
	}
	return u, err
}

// UserByEmail returns a user by email address.
func (s *Service) UserByEmail(ctx context.Context, email string) (*User, error) {
	u, err := scanUser(s.db.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE email = ? ORDER BY created_at LIMIT 1`, email))
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

// UserFilter selects users for the site admins' list (the admin API).
type UserFilter struct {
	// Query is a part of the username or email address, any case.
	Query string
	// SiteAdmin and Suspended, when set, keep only the users whose flag
	// has that value.
	SiteAdmin, Suspended *bool
}

// ListUsers returns at most limit (all when negative) of the users f
// selects, by username, from offset on, and how many it selects in all:
// the filter and the page are the store's.
func (s *Service) ListUsers(ctx context.Context, f UserFilter, offset, limit int) ([]*User, int, error) {
	where := `1 = 1`
	var args []any
	if q := strings.ToLower(f.Query); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		where += ` AND (LOWER(username) LIKE ?` + store.LikeEscape + ` OR LOWER(email) LIKE ?` + store.LikeEscape + `)`
		args = append(args, pattern, pattern)
	}
	if f.SiteAdmin != nil {
		where += ` AND is_site_admin = ?`
		args = append(args, *f.SiteAdmin)
	}
	if f.Suspended != nil {
		where += ` AND is_suspended = ?`
		args = append(args, *f.Suspended)
	}
	return store.Page(ctx, s.db, scanUser, userCols, "users", where, `username`, offset, limit, args...)
}

// UserIn returns a user by ID, reading through q (a transaction's Tx);
// lock also locks its row until the transaction ends.
func (s *Service) UserIn(ctx context.Context, q store.Q, id string, lock bool) (*User, error) {
	query := `SELECT ` + userCols + ` FROM users WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	u, err := scanUser(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("user %s not found", id)
	}
	return u, err
}

// ActiveSiteAdmins returns the IDs of the site admins who are not
// suspended, reading through q; lock also locks their rows until q's
// transaction ends, so that two transactions that could each leave the
// site without one are decided one after the other.
func (s *Service) ActiveSiteAdmins(ctx context.Context, q store.Q, lock bool) ([]string, error) {
	query := `SELECT id FROM users WHERE is_site_admin = ? AND is_suspended = ? ORDER BY id`
	if lock {
		query += store.ForUpdate(q)
	}
	return store.Strings(ctx, q, query, true, false)
}

// SetUserFlags sets a user's site admin rights and suspension (nil:
// unchanged) through q. Like every change to users, it raises the
// authentication epoch (migration 1040): the user's next request, on any
// replica, is authenticated afresh.
func (s *Service) SetUserFlags(ctx context.Context, q store.Q, id string, siteAdmin, suspended *bool) error {
	set, args := []string{}, []any{}
	if siteAdmin != nil {
		set, args = append(set, `is_site_admin = ?`), append(args, *siteAdmin)
	}
	if suspended != nil {
		set, args = append(set, `is_suspended = ?`), append(args, *suspended)
	}
	if len(set) == 0 {
		return nil
	}
	res, err := q.Exec(ctx, `UPDATE users SET `+strings.Join(set, ", ")+` WHERE id = ?`, append(args, id)...)
	if err != nil {
		return fmt.Errorf("updating user %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("user %s not found", id)
	}
	return nil
}

// DeleteUser removes a user and their tokens through q; their team and
// organization memberships, password and sessions go with the row (by
// cascade).
func (s *Service) DeleteUser(ctx context.Context, q store.Q, id string) error {
	if _, err := q.Exec(ctx, `DELETE FROM tokens WHERE kind = ? AND subject = ?`, string(KindUser), id); err != nil {
		return fmt.Errorf("deleting the tokens of user %s: %w", id, err)
	}
	res, err := q.Exec(ctx, `DELETE FROM users WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("deleting user %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("user %s not found", id)
	}
	return nil
}
