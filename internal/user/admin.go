package user

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The site administrators' users (Terraform Enterprise's admin users API):
// listing every user, suspending, deleting, and granting or revoking site
// admin rights. Every method is the SiteAdmin action (the guard hides the
// routes from everyone else; the service asks again).
//
// What a change decides takes effect on the user's very next request on
// every replica: suspension and site admin rights are columns of users,
// whose every update raises the authentication epoch (internal/auth,
// cache.go), and authentication refuses a suspended user's tokens and
// sessions.
//
// Rules that keep the site administered, each refused with a 422 that says
// why:
//   - a site admin cannot suspend, delete or revoke the site admin rights
//     of their own account (another site admin must);
//   - no change may leave the site without a site admin who is not
//     suspended (decided in the changing transaction, with the active site
//     admins' rows locked, so that two admins revoking each other at once
//     cannot both succeed);
//   - a user who is the only owner of an organization cannot be deleted
//     (as Terraform Enterprise: give it another owner or delete it first).
//
// Terrace has no two-factor sign-in: every user's two-factor is off, and
// disable_two_factor answers with the user as it is, which is what it
// asks for.

// AdminUser is a user as the admin API shows it: with the organizations
// the user belongs to.
type AdminUser struct {
	*auth.User
	Organizations []string
}

// withOrganizations adds to each user the organizations they belong to
// (one statement for all).
func (s *Service) withOrganizations(ctx context.Context, users []*auth.User) ([]*AdminUser, error) {
	ids := make([]string, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	orgs, err := s.memberships.UsersOrganizations(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]*AdminUser, len(users))
	for i, u := range users {
		out[i] = &AdminUser{User: u, Organizations: orgs[u.ID]}
	}
	return out, nil
}

// AdminList returns a page of the users f selects (the store filters and
// pages them) and how many it selects in all.
func (s *Service) AdminList(ctx context.Context, f auth.UserFilter, offset, limit int) ([]*AdminUser, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	users, total, err := s.auth.ListUsers(ctx, f, offset, limit)
	if err != nil {
		return nil, 0, err
	}
	out, err := s.withOrganizations(ctx, users)
	return out, total, err
}

// adminUser reads one user for an answer.
func (s *Service) adminUser(ctx context.Context, id string) (*AdminUser, error) {
	u, err := s.auth.GetUser(ctx, id)
	if err != nil {
		return nil, err
	}
	out, err := s.withOrganizations(ctx, []*auth.User{u})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// checkUserID answers a 404 for what cannot be a user's ID.
func checkUserID(id string) error {
	if !core.HasPrefix(id, core.PrefixUser) {
		return core.NotFound("user %q not found", id)
	}
	return nil
}

// self reports whether the caller is user id.
func self(ctx context.Context, id string) bool {
	p := auth.FromContext(ctx)
	return p.IsUser() && p.UserID == id
}

// keepAdministered refuses, inside the changing transaction, a change
// that left no site admin who is not suspended.
func (s *Service) keepAdministered(ctx context.Context, q store.Q) error {
	admins, err := s.auth.ActiveSiteAdmins(ctx, q, false)
	if err != nil {
		return err
	}
	if len(admins) == 0 {
		return core.Invalid("this would leave Terrace without a site admin who is not suspended: grant another user site admin rights first")
	}
	return nil
}

// setFlags changes a user's site admin rights or suspension (nil:
// unchanged) under the rules above, and returns the user as changed.
func (s *Service) setFlags(ctx context.Context, id string, siteAdmin, suspended *bool) (*AdminUser, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if err := checkUserID(id); err != nil {
		return nil, err
	}
	revokes, suspends := siteAdmin != nil && !*siteAdmin, suspended != nil && *suspended
	if self(ctx, id) && revokes {
		return nil, core.Invalid("you cannot revoke your own site admin rights: another site admin must")
	}
	if self(ctx, id) && suspends {
		return nil, core.Invalid("you cannot suspend your own account: another site admin must")
	}
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		if revokes || suspends {
			// Lock the active site admins first: a transaction that
			// could leave none waits for another that could.
			if _, err := s.auth.ActiveSiteAdmins(ctx, tx, true); err != nil {
				return err
			}
		}
		if err := s.auth.SetUserFlags(ctx, tx, id, siteAdmin, suspended); err != nil {
			return err
		}
		if revokes || suspends {
			return s.keepAdministered(ctx, tx)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.adminUser(ctx, id)
}

// Suspend suspends or unsuspends a user.
func (s *Service) Suspend(ctx context.Context, id string, suspended bool) (*AdminUser, error) {
	return s.setFlags(ctx, id, nil, &suspended)
}

// SetSiteAdmin grants or revokes a user's site admin rights.
func (s *Service) SetSiteAdmin(ctx context.Context, id string, admin bool) (*AdminUser, error) {
	return s.setFlags(ctx, id, &admin, nil)
}

// DisableTwoFactor answers with the user: Terrace has no two-factor
// sign-in, so the user's two-factor authentication is off already.
func (s *Service) DisableTwoFactor(ctx context.Context, id string) (*AdminUser, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if err := checkUserID(id); err != nil {
		return nil, err
	}
	return s.adminUser(ctx, id)
}

// AdminDelete deletes a user with their tokens, memberships and sessions,
// under the rules above.
func (s *Service) AdminDelete(ctx context.Context, id string) error {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return err
	}
	if err := checkUserID(id); err != nil {
		return err
	}
	if self(ctx, id) {
		return core.Invalid("you cannot delete your own account: another site admin must")
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		if _, err := s.auth.ActiveSiteAdmins(ctx, tx, true); err != nil {
			return err
		}
		u, err := s.auth.UserIn(ctx, tx, id, true)
		if err != nil {
			return err
		}
		owned, err := s.memberships.SoleOwnerOf(ctx, tx, id)
		if err != nil {
			return err
		}
		if len(owned) > 0 {
			noun := "organization"
			if len(owned) > 1 {
				noun = "organizations"
			}
			return core.Invalid("user %q is the only owner of %s %s: give each another owner, or delete it, first",
				u.Username, noun, strings.Join(owned, ", "))
		}
		if err := s.auth.DeleteUser(ctx, tx, id); err != nil {
			return err
		}
		return s.keepAdministered(ctx, tx)
	})
}
