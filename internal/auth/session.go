package auth

import "context"

// UserPrincipal builds the principal of a user signed in with a browser
// session (internal/signin) rather than a token: the same user principal a
// user token gives, as it is now, with no TokenID.
func (s *Service) UserPrincipal(ctx context.Context, userID string) (*Principal, error) {
	return s.principal(ctx, "", KindUser, userID, 0)
}
