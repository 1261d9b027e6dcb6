package user

import (
	"context"
	"net/mail"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/store"
)

// Auth is what this package needs from package auth (users and tokens).
type Auth interface {
	GetUser(ctx context.Context, id string) (*auth.User, error)
	UpdateUser(ctx context.Context, id, username, email string) (*auth.User, error)
	CreateToken(ctx context.Context, q store.Q, n auth.NewToken) (*auth.Token, string, error)
	RegenerateToken(ctx context.Context, n auth.NewToken) (*auth.Token, string, error)
	GetToken(ctx context.Context, id string) (*auth.Token, error)
	ListTokens(ctx context.Context, kind auth.Kind, subjects ...string) ([]*auth.Token, error)
	DeleteToken(ctx context.Context, q store.Q, id string) error
	// The site admins' users (admin.go).
	ListUsers(ctx context.Context, f auth.UserFilter, offset, limit int) ([]*auth.User, int, error)
	UserIn(ctx context.Context, q store.Q, id string, lock bool) (*auth.User, error)
	ActiveSiteAdmins(ctx context.Context, q store.Q, lock bool) ([]string, error)
	SetUserFlags(ctx context.Context, q store.Q, id string, siteAdmin, suspended *bool) error
	DeleteUser(ctx context.Context, q store.Q, id string) error
}

// Organizations finds organizations the caller may see (package organization).
type Organizations interface {
	Get(ctx context.Context, name string) (*organization.Organization, error)
	NameByID(ctx context.Context, id string) (string, error)
}

// Memberships tells which organizations a user belongs to (package team).
type Memberships interface {
	UserOrganizations(ctx context.Context, userID string) (member, owner []string, err error)
	// UsersOrganizations is UserOrganizations' member list for several
	// users at once.
	UsersOrganizations(ctx context.Context, userIDs []string) (map[string][]string, error)
	// SoleOwnerOf returns the organizations whose only owner is the user
	// (through q).
	SoleOwnerOf(ctx context.Context, q store.Q, userID string) ([]string, error)
}

// Service applies the rules for users, user tokens and organization tokens.
type Service struct {
	db          *store.DB
	auth        Auth
	orgs        Organizations
	memberships Memberships
}

// NewService returns a user service.
func NewService(db *store.DB, a Auth, orgs Organizations, m Memberships) *Service {
	return &Service{db: db, auth: a, orgs: orgs, memberships: m}
}

// Current returns the caller's own user; only user tokens have one (others
// get a 404, as from HCP Terraform).
func (s *Service) Current(ctx context.Context) (*auth.User, error) {
	p := auth.FromContext(ctx)
	if !p.IsUser() {
		return nil, core.NotFound("account details are only available with a user token")
	}
	return s.auth.GetUser(ctx, p.UserID)
}

var usernameRE = core.NewPattern(`^[A-Za-z0-9][A-Za-z0-9_-]*$`, 1, 64)

// UpdateOptions change the current user; nil is unchanged.
type UpdateOptions struct {
	Username *string `json:"username"`
	Email    *string `json:"email"`
}

// UpdateCurrent changes the caller's username or email.
func (s *Service) UpdateCurrent(ctx context.Context, opts UpdateOptions) (*auth.User, error) {
	u, err := s.Current(ctx)
	if err != nil {
		return nil, err
	}
	username, email := u.Username, u.Email
	if opts.Username != nil {
		if !usernameRE.MatchString(*opts.Username) {
			return nil, core.Invalid("username %q is invalid: use 1 to 64 letters, digits, '-' and '_', starting with a letter or digit", *opts.Username)
		}
		username = *opts.Username
	}
	if opts.Email != nil {
		addr, err := mail.ParseAddress(*opts.Email)
		if err != nil || addr.Address != *opts.Email {
			return nil, core.Invalid("email %q is not a valid address", *opts.Email)
		}
		email = addr.Address
	}
	if username == u.Username && email == u.Email {
		return u, nil
	}
	return s.auth.UpdateUser(ctx, u.ID, username, email)
}

// Get returns a user the caller may see: itself, or a member of an
// organization the caller can access. Site admins see everyone.
func (s *Service) Get(ctx context.Context, id string) (*auth.User, error) {
	notFound := core.NotFound("user %q not found", id)
	if !core.HasPrefix(id, core.PrefixUser) {
		return nil, notFound
	}
	u, err := s.auth.GetUser(ctx, id)
	if err != nil {
		return nil, notFound
	}
	p := auth.FromContext(ctx)
	if p.SiteAdmin || (p.IsUser() && p.UserID == id) {
		return u, nil
	}
	orgs, _, err := s.memberships.UserOrganizations(ctx, id)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(orgs, p.CanAccessOrganization) {
		return u, nil
	}
	return nil, notFound
}

// --- user tokens

// checkSelf allows only the user itself to manage its tokens; anyone else
// gets a 404.
func checkSelf(ctx context.Context, userID string) error {
	p := auth.FromContext(ctx)
	if !p.IsUser() || p.UserID != userID {
		return core.NotFound("user %q not found", userID)
	}
	return nil
}

// UserTokens lists a user's tokens, oldest first.
func (s *Service) UserTokens(ctx context.Context, userID string) ([]*auth.Token, error) {
	if err := checkSelf(ctx, userID); err != nil {
		return nil, err
	}
	return s.auth.ListTokens(ctx, auth.KindUser, userID)
}

// CreateUserToken mints a user token for the caller.
func (s *Service) CreateUserToken(ctx context.Context, userID, description string, expiredAt *time.Time) (*auth.Token, string, error) {
	if err := checkSelf(ctx, userID); err != nil {
		return nil, "", err
	}
	exp, err := ExpiryFor(expiredAt)
	if err != nil {
		return nil, "", err
	}
	return s.auth.CreateToken(ctx, s.db, auth.NewToken{Kind: auth.KindUser, Subject: userID, Description: description, CreatedBy: userID, ExpiredAt: exp})
}

// --- organization tokens

// orgTokenKind maps the token query parameter to a token kind.
func orgTokenKind(tokenType string) (auth.Kind, error) {
	switch tokenType {
	case "", "organization":
		return auth.KindOrganization, nil
	case "audit-trails", "audit_trails":
		return auth.KindAuditTrails, nil
	}
	return "", core.BadRequest("token must be audit-trails or absent, not %q", tokenType)
}

// orgForTokens returns the organization whose tokens the caller manages:
// the model's OrgManageTokens (owners with a user token), decided before
// any transaction (404 when the organization is not visible, 403 for
// other callers).
func (s *Service) orgForTokens(ctx context.Context, name string) (*organization.Organization, error) {
	org, err := s.orgs.Get(ctx, name)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgManageTokens, authz.Resource{Organization: name}); err != nil {
		return nil, err
	}
	return org, nil
}

// CreateOrganizationToken replaces the organization's token of the given
// type with a new one.
func (s *Service) CreateOrganizationToken(ctx context.Context, name, tokenType string, expiredAt *time.Time) (*auth.Token, string, error) {
	kind, err := orgTokenKind(tokenType)
	if err != nil {
		return nil, "", err
	}
	org, err := s.orgForTokens(ctx, name)
	if err != nil {
		return nil, "", err
	}
	exp, err := ExpiryFor(expiredAt)
	if err != nil {
		return nil, "", err
	}
	return s.auth.RegenerateToken(ctx, auth.NewToken{Kind: kind, Subject: org.ID, CreatedBy: auth.FromContext(ctx).UserID, ExpiredAt: exp})
}

// OrganizationToken returns the organization's token of the given type.
func (s *Service) OrganizationToken(ctx context.Context, name, tokenType string) (*auth.Token, error) {
	kind, err := orgTokenKind(tokenType)
	if err != nil {
		return nil, err
	}
	org, err := s.orgForTokens(ctx, name)
	if err != nil {
		return nil, err
	}
	toks, err := s.auth.ListTokens(ctx, kind, org.ID)
	if err != nil {
		return nil, err
	}
	for _, t := range toks {
		if t.Legacy {
			return t, nil
		}
	}
	return nil, core.NotFound("organization %q has no %s token", name, kind)
}

// DeleteOrganizationToken revokes the organization's token of the given type.
func (s *Service) DeleteOrganizationToken(ctx context.Context, name, tokenType string) error {
	t, err := s.OrganizationToken(ctx, name, tokenType)
	if err != nil {
		return err
	}
	return s.auth.DeleteToken(ctx, s.db, t.ID)
}

// --- tokens by ID

// Token returns a token by ID for authentication-tokens/{id}; callers
// check access by kind.
func (s *Service) Token(ctx context.Context, id string) (*auth.Token, error) {
	if !core.HasPrefix(id, core.PrefixToken) {
		return nil, core.NotFound("token %q not found", id)
	}
	t, err := s.auth.GetToken(ctx, id)
	if err != nil {
		return nil, core.NotFound("token %q not found", id)
	}
	return t, nil
}

// CheckUserToken returns 404 unless the user token belongs to the caller.
func (s *Service) CheckUserToken(ctx context.Context, t *auth.Token) error {
	if t.Kind != auth.KindUser || checkSelf(ctx, t.Subject) != nil {
		return core.NotFound("token %q not found", t.ID)
	}
	return nil
}

// DeleteUserToken revokes one of the caller's tokens.
func (s *Service) DeleteUserToken(ctx context.Context, t *auth.Token) error {
	if err := s.CheckUserToken(ctx, t); err != nil {
		return err
	}
	return s.auth.DeleteToken(ctx, s.db, t.ID)
}
