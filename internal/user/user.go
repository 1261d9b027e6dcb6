// Package user serves the user-facing side of identity in the TFE API v2:
// the current account (account/details, account/update), users, user
// tokens, organization tokens, and authentication-tokens/{id}, which it
// dispatches by token kind. Users and token storage stay in package auth;
// this package holds the rules (who may see or mint which token) and the
// wire forms other packages reuse (users, authentication-tokens).
package user

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
)

// JSON is the wire form of a user (go-tfe's User).
type JSON struct {
	ID               string           `jsonapi:"primary,users"`
	AvatarURL        string           `jsonapi:"attr,avatar-url"`
	Email            string           `jsonapi:"attr,email"`
	IsServiceAccount bool             `jsonapi:"attr,is-service-account"`
	TwoFactor        *twoFactor       `jsonapi:"attr,two-factor"`
	UnconfirmedEmail string           `jsonapi:"attr,unconfirmed-email"`
	Username         string           `jsonapi:"attr,username"`
	V2Only           bool             `jsonapi:"attr,v2-only"`
	IsSiteAdmin      *bool            `jsonapi:"attr,is-site-admin,omitempty"`
	IsAdmin          *bool            `jsonapi:"attr,is-admin,omitempty"`
	IsSsoLogin       bool             `jsonapi:"attr,is-sso-login"`
	Permissions      *userPermissions `jsonapi:"attr,permissions,omitempty"`
}

type twoFactor struct {
	Enabled  bool `json:"enabled"`
	Verified bool `json:"verified"`
}

type userPermissions struct {
	CanCreateOrganizations bool `json:"can-create-organizations"`
	CanChangeEmail         bool `json:"can-change-email"`
	CanChangeUsername      bool `json:"can-change-username"`
	CanManageUserTokens    bool `json:"can-manage-user-tokens"`
	CanView2FaSettings     bool `json:"can-view2fa-settings"`
	CanManageHcpAccount    bool `json:"can-manage-hcp-account"`
}

// avatarURL is the Gravatar image of an email address, as HCP Terraform
// shows users.
func avatarURL(email string) string {
	sum := md5.Sum([]byte(strings.ToLower(strings.TrimSpace(email))))
	return "https://www.gravatar.com/avatar/" + hex.EncodeToString(sum[:]) + "?s=100&d=mm"
}

// ToJSON renders a user. self adds what only the user (or a site admin)
// sees about their own account: admin flags and permissions (see SelfJSON,
// which asks the model for the ones it decides).
func ToJSON(u *auth.User, self bool) *JSON {
	j := &JSON{
		ID:        u.ID,
		AvatarURL: avatarURL(u.Email),
		Email:     u.Email,
		TwoFactor: &twoFactor{},
		Username:  u.Username,
	}
	if self {
		admin := u.SiteAdmin
		j.IsSiteAdmin, j.IsAdmin = &admin, &admin
		j.Permissions = &userPermissions{CanChangeEmail: true, CanChangeUsername: true, CanManageUserTokens: true}
	}
	return j
}

// SelfJSON renders the caller's own account (the caller in ctx is u): its
// permissions are the model's decisions, so that what it shows is what
// the server enforces (can-create-organizations is OrgCreate's).
func SelfJSON(ctx context.Context, u *auth.User) *JSON {
	j := ToJSON(u, true)
	j.Permissions.CanCreateOrganizations = authz.Allows(ctx, authz.OrgCreate, authz.Resource{}) == nil
	return j
}

// UserJSON renders u for the caller in ctx: SelfJSON when it is the
// caller's own account (with a user token), else ToJSON without it.
func UserJSON(ctx context.Context, u *auth.User) *JSON {
	if p := auth.FromContext(ctx); p.IsUser() && p.UserID == u.ID {
		return SelfJSON(ctx, u)
	}
	return ToJSON(u, false)
}

// TokenJSON is the wire form of every token kind (go-tfe's TeamToken,
// OrganizationToken, UserToken and AgentToken share it). Token holds the
// secret only in the response to a create.
type TokenJSON struct {
	ID          string     `jsonapi:"primary,authentication-tokens"`
	CreatedAt   time.Time  `jsonapi:"attr,created-at,iso8601"`
	Description *string    `jsonapi:"attr,description"`
	LastUsedAt  *time.Time `jsonapi:"attr,last-used-at,iso8601"`
	Token       string     `jsonapi:"attr,token,omitempty"`
	ExpiredAt   *time.Time `jsonapi:"attr,expired-at,iso8601"`
	CreatedBy   *CreatedBy `jsonapi:"polyrelation,created-by,omitempty"`
	Team        *TeamRef   `jsonapi:"relation,team,omitempty"`
}

// CreatedBy is the polymorphic created-by relationship of a token.
type CreatedBy struct {
	Organization *OrganizationRef
	Team         *TeamRef
	User         *UserRef
}

// OrganizationRef, TeamRef and UserRef are relationship linkage.
type (
	OrganizationRef struct {
		Name string `jsonapi:"primary,organizations"`
	}
	TeamRef struct {
		ID string `jsonapi:"primary,teams"`
	}
	UserRef struct {
		ID string `jsonapi:"primary,users"`
	}
)

// OrgNames resolves an organization ID to its name (created-by of tokens
// minted with an organization token).
type OrgNames func(ctx context.Context, id string) (string, error)

// TokenToJSON renders a token; secret is "" except right after creation.
// Legacy tokens have no description (null), as HCP Terraform shows them.
func TokenToJSON(ctx context.Context, t *auth.Token, secret string, orgNames OrgNames) *TokenJSON {
	j := &TokenJSON{ID: t.ID, CreatedAt: t.CreatedAt, LastUsedAt: t.LastUsedAt, ExpiredAt: t.ExpiredAt, Token: secret}
	if !t.Legacy {
		d := t.Description
		j.Description = &d
	}
	switch {
	case core.HasPrefix(t.CreatedBy, core.PrefixUser):
		j.CreatedBy = &CreatedBy{User: &UserRef{ID: t.CreatedBy}}
	case core.HasPrefix(t.CreatedBy, core.PrefixTeam):
		j.CreatedBy = &CreatedBy{Team: &TeamRef{ID: t.CreatedBy}}
	case core.HasPrefix(t.CreatedBy, core.PrefixOrganization) && orgNames != nil:
		if name, err := orgNames(ctx, t.CreatedBy); err == nil {
			j.CreatedBy = &CreatedBy{Organization: &OrganizationRef{Name: name}}
		}
	}
	if t.Kind == auth.KindTeam {
		j.Team = &TeamRef{ID: t.Subject}
	}
	return j
}

// TokenGetter reads a token's metadata.
type TokenGetter interface {
	GetToken(ctx context.Context, id string) (*auth.Token, error)
}

// CreatorOf returns what a new token records as its creator: the user,
// team or organization (by ID) behind the caller's own token.
func CreatorOf(ctx context.Context, tokens TokenGetter, p *auth.Principal) string {
	if p == nil {
		return ""
	}
	switch p.Kind {
	case auth.KindUser:
		return p.UserID
	case auth.KindTeam:
		return p.TeamID
	case auth.KindOrganization:
		if t, err := tokens.GetToken(ctx, p.TokenID); err == nil {
			return t.Subject
		}
	}
	return ""
}

// DefaultTokenLifetime is how long a token lives when its creator gives no
// expired-at (HCP Terraform's default, which go-tfe's tests expect).
const DefaultTokenLifetime = 2 // years

// ExpiryFor checks a requested expiry (which must be in the future) and
// fills in the default when none is given.
func ExpiryFor(requested *time.Time) (*time.Time, error) {
	now := core.Now()
	if requested == nil {
		exp := now.AddDate(DefaultTokenLifetime, 0, 0)
		return &exp, nil
	}
	exp := requested.UTC().Truncate(time.Microsecond)
	if !exp.After(now) {
		return nil, core.Invalid("expired-at must be in the future")
	}
	return &exp, nil
}
