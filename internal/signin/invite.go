package signin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/audit"
	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/team"
)

// Invite records an invitation for a membership created by email (inside
// the membership's transaction, q) and returns the sending of its link,
// for after the commit. The link is emailed with Options.Mail; without a
// mailer nothing is sent and a site admin makes a link with `terrace user
// invite-link` (InvitationLink).
func (s *Service) Invite(ctx context.Context, q store.Q, inv team.Invitation) (func(context.Context), error) {
	link, err := s.newInvitation(ctx, q, inv)
	if err != nil {
		return nil, err
	}
	if s.opts.Mail == nil {
		return nil, nil
	}
	if inv.Suspended {
		// The link stays valid for its lifetime: a site admin can lift
		// the suspension and hand it on (`terrace user invite-link`
		// makes a fresh one).
		s.opts.Logger.Info("not emailing an invitation: the user is suspended", "organization", inv.Organization, "membership", inv.MembershipID)
		return nil, nil
	}
	return func(ctx context.Context) {
		body := fmt.Sprintf("You are invited to the organization %s on Terrace (%s).\n\nOpen this link to accept (it works for %s):\n\n%s\n",
			inv.Organization, s.opts.BaseURL, s.opts.InvitationLifetime, link)
		if err := s.opts.Mail(ctx, inv.Email, "Invitation to "+inv.Organization+" on Terrace", body); err != nil {
			s.opts.Logger.Warn("sending an invitation", "organization", inv.Organization, "membership", inv.MembershipID, "err", err)
		}
	}, nil
}

// newInvitation stores an invitation (replacing an earlier one for the
// same membership) and returns its link.
func (s *Service) newInvitation(ctx context.Context, q store.Q, inv team.Invitation) (string, error) {
	return storeInvitation(ctx, q, s.opts.BaseURL, s.opts.InvitationLifetime, inv)
}

// DefaultInvitationLifetime is how long an invitation link works.
const DefaultInvitationLifetime = 7 * 24 * time.Hour

func storeInvitation(ctx context.Context, q store.Q, baseURL string, lifetime time.Duration, inv team.Invitation) (string, error) {
	secret := randomSecret()
	now := core.Now()
	if _, err := q.Exec(ctx, `DELETE FROM invitations WHERE membership_id = ?`, inv.MembershipID); err != nil {
		return "", err
	}
	_, err := q.Exec(ctx, `INSERT INTO invitations (token_hash, membership_id, organization_name, user_id, created_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)`,
		hash(secret), inv.MembershipID, inv.Organization, inv.UserID, core.Micros(now), core.Micros(now.Add(lifetime)))
	if err != nil {
		return "", fmt.Errorf("storing the invitation of %s: %w", inv.MembershipID, err)
	}
	return strings.TrimSuffix(baseURL, "/") + "/app/invitations/" + secret, nil
}

// InvitationLink makes a fresh link for a membership still invited (an
// earlier link stops working), straight in the store, for `terrace user
// invite-link` when no mail server sends invitations.
func InvitationLink(ctx context.Context, db *store.DB, baseURL string, inv team.Invitation) (string, error) {
	var link string
	err := db.Tx(ctx, func(tx *store.Tx) error {
		var err error
		link, err = storeInvitation(ctx, tx, baseURL, DefaultInvitationLifetime, inv)
		return err
	})
	return link, err
}

type invitation struct {
	MembershipID, Organization, UserID string
}

// lookupInvitation returns the invitation behind a link's secret.
func (s *Service) lookupInvitation(ctx context.Context, secret string) (*invitation, error) {
	var inv invitation
	var expires int64
	err := s.db.QueryRow(ctx, `SELECT membership_id, organization_name, user_id, expires_at FROM invitations WHERE token_hash = ?`, hash(secret)).
		Scan(&inv.MembershipID, &inv.Organization, &inv.UserID, &expires)
	if store.IsNoRows(err) {
		return nil, core.NotFound("this invitation link is unknown or was already used")
	}
	if err != nil {
		return nil, err
	}
	if core.Now().After(core.FromMicros(expires)) {
		return nil, core.NotFound("this invitation link has expired: ask an owner of the organization for a new one")
	}
	return &inv, nil
}

// accept activates the invitation's membership and deletes the
// invitation, inside tx.
func (s *Service) accept(ctx context.Context, tx store.Q, inv *invitation) error {
	if err := s.opts.Memberships.ActivateMembership(ctx, tx, inv.MembershipID); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM invitations WHERE membership_id = ?`, inv.MembershipID)
	return err
}

// invitee is the invited user, refused while suspended: a suspended
// account neither joins an organization nor sets a password until a site
// admin lifts the suspension (the invitation waits, for its lifetime).
func (s *Service) invitee(ctx context.Context, inv *invitation) (*auth.User, error) {
	u, err := s.opts.Users.GetUser(ctx, inv.UserID)
	if err != nil {
		return nil, err
	}
	if u.Suspended {
		return nil, errSuspended
	}
	return u, nil
}

func (s *Service) hasPassword(ctx context.Context, userID string) (bool, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT COUNT(*) FROM user_passwords WHERE user_id = ?`, userID).Scan(&n)
	return n > 0, err
}

type invitationPage struct {
	page
	Token, Organization, Username, SSO string
	HasPassword                        bool
	MinLength                          int
}

func (s *Service) invitationPage(w http.ResponseWriter, r *http.Request) {
	s.showInvitation(w, r, http.StatusOK, "")
}

func (s *Service) showInvitation(w http.ResponseWriter, r *http.Request, status int, problem string) {
	ctx := r.Context()
	secret := r.PathValue("token")
	inv, err := s.lookupInvitation(ctx, secret)
	if err != nil {
		s.message(w, r, statusOf(err), "Invitation", detail(err), "/app/signin")
		return
	}
	u, err := s.invitee(ctx, inv)
	var has bool
	if err == nil {
		has, err = s.hasPassword(ctx, u.ID)
	}
	if err != nil {
		s.message(w, r, statusOf(err), "Invitation", detail(err), "")
		return
	}
	s.render(w, r, status, "invitation", "Invitation", invitationPage{page: page{Error: problem},
		Token: secret, Organization: inv.Organization, Username: u.Username, SSO: s.ssoName(), HasPassword: has, MinLength: MinPasswordLength})
}

func (s *Service) acceptInvitation(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if err := r.ParseForm(); err != nil {
		s.showInvitation(w, r, http.StatusBadRequest, "The form could not be read.")
		return
	}
	inv, err := s.lookupInvitation(ctx, r.PathValue("token"))
	if err != nil {
		s.message(w, r, statusOf(err), "Invitation", detail(err), "/app/signin")
		return
	}
	if _, err := s.invitee(ctx, inv); err != nil {
		s.message(w, r, statusOf(err), "Invitation", detail(err), "")
		return
	}
	has, err := s.hasPassword(ctx, inv.UserID)
	if err != nil {
		s.message(w, r, http.StatusInternalServerError, "Invitation", detail(err), "")
		return
	}
	pw := r.PostFormValue("password")
	if !has && pw != r.PostFormValue("confirm") {
		s.showInvitation(w, r, http.StatusUnprocessableEntity, "The two passwords differ.")
		return
	}
	err = s.db.Tx(ctx, func(tx *store.Tx) error {
		if !has {
			if err := s.setPassword(ctx, tx, inv.UserID, pw); err != nil {
				return err
			}
		}
		return s.accept(ctx, tx, inv)
	})
	if err != nil {
		s.showInvitation(w, r, statusOf(err), detail(err))
		return
	}
	if has {
		s.message(w, r, http.StatusOK, "Invitation accepted", "You are now a member of "+inv.Organization+". Sign in with your password.", "/app/signin")
		return
	}
	if err := s.setCookie(ctx, w, inv.UserID); err != nil {
		s.message(w, r, http.StatusInternalServerError, "Invitation", "The invitation was accepted, but signing in failed: sign in with your new password.", "/app/signin")
		return
	}
	s.recordSignin(r, audit.SignIn, inv.UserID, "", "invitation")
	http.Redirect(w, r, "/app/", http.StatusSeeOther)
}
