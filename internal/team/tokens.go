package team

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/user"
)

// TokenOptions describe a new team token.
type TokenOptions struct {
	// Description is nil for the team's legacy token, which a new one
	// replaces; tokens with a description (even "") are kept side by side.
	Description *string
	ExpiredAt   *time.Time
}

// errDescriptionTaken is the error go-tfe recognises as
// ErrInvalidDescriptionConflict.
var errDescriptionTaken = &core.Error{Kind: core.KindInvalid, Title: "invalid attributes", Detail: "Validation failed: Description has already been taken"}

// tokenTeam loads a team whose tokens the caller may manage (the model's
// TeamManageTokens): 404 when the team is not visible, 403 when it is but
// the caller may not.
func (s *Service) tokenTeam(ctx context.Context, teamID string) (*Team, error) {
	t, err := s.Get(ctx, teamID)
	if err != nil {
		return nil, err
	}
	if err := allows(ctx, authz.TeamManageTokens, t); err != nil {
		return nil, err
	}
	return t, nil
}

// CreateToken mints a team token and returns it with its secret.
func (s *Service) CreateToken(ctx context.Context, teamID string, opts TokenOptions) (*auth.Token, string, error) {
	t, err := s.tokenTeam(ctx, teamID)
	if err != nil {
		return nil, "", err
	}
	exp, err := user.ExpiryFor(opts.ExpiredAt)
	if err != nil {
		return nil, "", err
	}
	n := auth.NewToken{Kind: auth.KindTeam, Subject: t.ID, CreatedBy: user.CreatorOf(ctx, s.tokens, auth.FromContext(ctx)), ExpiredAt: exp}
	if opts.Description == nil {
		return s.tokens.RegenerateToken(ctx, n)
	}
	n.Description = *opts.Description
	existing, err := s.tokens.ListTokens(ctx, auth.KindTeam, t.ID)
	if err != nil {
		return nil, "", err
	}
	for _, e := range existing {
		if !e.Legacy && e.Description == n.Description {
			return nil, "", errDescriptionTaken
		}
	}
	return s.tokens.CreateToken(ctx, s.db, n)
}

// Tokens returns a team's tokens, oldest first.
func (s *Service) Tokens(ctx context.Context, teamID string) ([]*auth.Token, error) {
	t, err := s.tokenTeam(ctx, teamID)
	if err != nil {
		return nil, err
	}
	return s.tokens.ListTokens(ctx, auth.KindTeam, t.ID)
}

// LegacyToken returns a team's legacy token.
func (s *Service) LegacyToken(ctx context.Context, teamID string) (*auth.Token, error) {
	toks, err := s.Tokens(ctx, teamID)
	if err != nil {
		return nil, err
	}
	for _, tok := range toks {
		if tok.Legacy {
			return tok, nil
		}
	}
	return nil, core.NotFound("team %s has no token", teamID)
}

// DeleteLegacyToken revokes a team's legacy token.
func (s *Service) DeleteLegacyToken(ctx context.Context, teamID string) error {
	tok, err := s.LegacyToken(ctx, teamID)
	if err != nil {
		return err
	}
	return s.tokens.DeleteToken(ctx, s.db, tok.ID)
}

// CheckToken returns 404 unless the caller may see the team token, and 403
// when it may see but not manage it.
func (s *Service) CheckToken(ctx context.Context, tok *auth.Token) error {
	if tok.Kind != auth.KindTeam {
		return core.NotFound("token %s not found", tok.ID)
	}
	if _, err := s.tokenTeam(ctx, tok.Subject); err != nil {
		if core.KindOf(err) == core.KindNotFound {
			return core.NotFound("token %s not found", tok.ID)
		}
		return err
	}
	return nil
}

// DeleteToken revokes a team token by ID.
func (s *Service) DeleteToken(ctx context.Context, tok *auth.Token) error {
	if err := s.CheckToken(ctx, tok); err != nil {
		return err
	}
	return s.tokens.DeleteToken(ctx, s.db, tok.ID)
}

// OrganizationTokens returns the tokens of the organization's teams whose
// tokens the caller may manage, optionally only teams whose name contains
// query, ordered by sort ("created-at" by default, "expired-at",
// "last-used-at", "team-name"; a leading "-" reverses).
func (s *Service) OrganizationTokens(ctx context.Context, org, query, sortBy string) ([]*auth.Token, error) {
	if err := s.checkOrg(ctx, s.db, org); err != nil {
		return nil, err
	}
	// The teams' rows and the model (TeamManageTokens, on the caller's
	// standing read once) decide; their tokens come in one statement.
	teams, err := s.listRows(ctx, org, ListOptions{Query: query})
	if err != nil {
		return nil, err
	}
	manages, err := authz.TeamsAllowing(ctx, org, authz.TeamManageTokens)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	var ids []string
	for _, t := range teams {
		if !manages(t.Authz()) {
			continue
		}
		names[t.ID] = t.Name
		ids = append(ids, t.ID)
	}
	out, err := s.tokens.ListTokens(ctx, auth.KindTeam, ids...)
	if err != nil {
		return nil, err
	}
	desc := strings.HasPrefix(sortBy, "-")
	key := strings.TrimPrefix(sortBy, "-")
	timeOf := func(tp *time.Time) time.Time {
		if tp == nil {
			return time.Time{}
		}
		return *tp
	}
	var less func(a, b *auth.Token) int
	switch key {
	case "", "created-at":
		less = func(a, b *auth.Token) int { return a.CreatedAt.Compare(b.CreatedAt) }
	case "expired-at":
		less = func(a, b *auth.Token) int { return timeOf(a.ExpiredAt).Compare(timeOf(b.ExpiredAt)) }
	case "last-used-at":
		less = func(a, b *auth.Token) int { return timeOf(a.LastUsedAt).Compare(timeOf(b.LastUsedAt)) }
	case "team-name":
		less = func(a, b *auth.Token) int { return strings.Compare(names[a.Subject], names[b.Subject]) }
	default:
		return nil, core.BadRequest("sort must be one of created-at, expired-at, last-used-at, team-name (optionally with a leading -), not %q", sortBy)
	}
	sort.SliceStable(out, func(i, j int) bool {
		c := less(out[i], out[j])
		if c == 0 {
			c = strings.Compare(out[i].ID, out[j].ID)
		}
		if desc {
			return c > 0
		}
		return c < 0
	})
	return out, nil
}
