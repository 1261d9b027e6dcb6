package signin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ChangePassword replaces a user's password when current is the password
// they have now, and ends every other session of the user (keep is the
// secret of the session making the change, "" for none). Wrong current
// passwords count against the account's sign-in limit: a stolen session
// cannot guess its way to the password.
func (s *Service) ChangePassword(ctx context.Context, userID, current, password, keep string) error {
	u, err := s.opts.Users.GetUser(ctx, userID)
	if err != nil {
		return err
	}
	if err := s.perUser.check(ctx, strings.ToLower(u.Username)); err != nil {
		return err
	}
	var stored string
	err = s.db.QueryRow(ctx, `SELECT hash FROM user_passwords WHERE user_id = ?`, userID).Scan(&stored)
	if store.IsNoRows(err) {
		return core.Invalid("you have no password to change: you sign in with single sign-on")
	}
	if err != nil {
		return fmt.Errorf("reading the password of %s: %w", userID, err)
	}
	ok, err := VerifyPassword(current, stored)
	if err != nil {
		return fmt.Errorf("checking the password of %s: %w", userID, err)
	}
	if !ok {
		return core.Unauthorized("the current password is wrong")
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error { return storePassword(ctx, tx, userID, password, s.opts.Hash, keep) })
}

type settingsPage struct {
	page
	Done      string
	MinLength int
}

func (s *Service) settingsPage(w http.ResponseWriter, r *http.Request) {
	s.showSettings(w, r, http.StatusOK, "", "")
}

func (s *Service) showSettings(w http.ResponseWriter, r *http.Request, status int, done, problem string) {
	if requireUser(w, r) == nil {
		return
	}
	s.render(w, r, status, "settings", "Password and sessions", settingsPage{page: page{Error: problem}, Done: done, MinLength: MinPasswordLength})
}

// changePassword changes the signed-in user's password; this browser's
// session stays, every other one ends.
func (s *Service) changePassword(w http.ResponseWriter, r *http.Request) {
	p := requireUser(w, r)
	if p == nil {
		return
	}
	if err := r.ParseForm(); err != nil {
		s.showSettings(w, r, http.StatusBadRequest, "", "The form could not be read.")
		return
	}
	if r.PostFormValue("new") != r.PostFormValue("confirm") {
		s.showSettings(w, r, http.StatusUnprocessableEntity, "", "The two new passwords differ.")
		return
	}
	keep := ""
	if c, err := r.Cookie(CookieName); err == nil {
		keep = c.Value
	}
	err := s.ChangePassword(r.Context(), p.UserID, r.PostFormValue("current"), r.PostFormValue("new"), keep)
	if err != nil {
		s.recordSignin(r, audit.ChangePasswordFail, p.UserID, p.Username, "")
		var tm tooMany
		switch {
		case errors.As(err, &tm):
			w.Header().Set("Retry-After", strconv.Itoa(int(tm.wait.Seconds())+1))
			s.showSettings(w, r, http.StatusTooManyRequests, "", "Too many attempts. "+tm.Error()+".")
		default:
			s.showSettings(w, r, statusOf(err), "", "The password was not changed: "+detail(err)+".")
		}
		return
	}
	s.recordSignin(r, audit.ChangePassword, p.UserID, p.Username, "")
	s.showSettings(w, r, http.StatusOK, "Your password is changed. Every other session of yours has ended.", "")
}

// signoutEverywhere ends every session of the signed-in user, this one
// included.
func (s *Service) signoutEverywhere(w http.ResponseWriter, r *http.Request) {
	p := requireUser(w, r)
	if p == nil {
		return
	}
	if err := s.EndUserSessions(r.Context(), p.UserID); err != nil {
		s.opts.Logger.Error("ending a user's sessions", "err", err)
		s.message(w, r, http.StatusInternalServerError, "Sign out", "Signing out failed; try again.", "")
		return
	}
	s.recordSignin(r, audit.SignOutEverywhere, p.UserID, p.Username, "")
	clearCookie(w)
	http.Redirect(w, r, "/app/signin", http.StatusSeeOther)
}

// recordSignin puts a sign-in event in the audit trail; method says how
// ("password", "oidc", "invitation"; "" when it does not apply).
func (s *Service) recordSignin(r *http.Request, action, userID, username, method string) {
	if s.opts.Audit == nil {
		return
	}
	if username == "" && userID != "" {
		if u, err := s.opts.Users.GetUser(r.Context(), userID); err == nil {
			username = u.Username
		}
	}
	var meta map[string]string
	if method != "" {
		meta = map[string]string{"method": method}
	}
	s.opts.Audit.RecordSignin(r, action, userID, username, meta)
}

// recordAttempt records a refused password sign-in for the name given,
// naming the user when there is one by that name or email.
func (s *Service) recordAttempt(r *http.Request, action, login string) {
	if s.opts.Audit == nil {
		return
	}
	login = strings.TrimSpace(login)
	id := ""
	u, err := s.opts.Users.UserByName(r.Context(), login)
	if core.KindOf(err) == core.KindNotFound && strings.Contains(login, "@") {
		u, err = s.opts.Users.UserByEmail(r.Context(), login)
	}
	if err == nil {
		id, login = u.ID, u.Username
	} else {
		// A name that matches no account is not recorded: it may be a
		// password typed into the wrong field.
		login = ""
	}
	s.recordSignin(r, action, id, login, "password")
}
