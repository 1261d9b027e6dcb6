package authz_test

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
)

// TestAuditTrailIsReadWithTheOrganizationsTokens: the model decides who
// reads an organization's audit trail (the audit service asks it): the
// organization's own organization or audit-trails token, as in HCP
// Terraform; no user token (an owner's, a site admin's), team token or
// run token.
func TestAuditTrailIsReadWithTheOrganizationsTokens(t *testing.T) {
	t.Parallel()
	s := &authz.Service{}
	ctx := context.Background()
	acme := authz.Resource{Organization: "acme"}
	for _, c := range []struct {
		who  string
		p    *auth.Principal
		want core.Kind // 0: allowed
	}{
		{"the organization's token", &auth.Principal{Kind: auth.KindOrganization, Organization: "acme"}, 0},
		{"an audit-trails token", &auth.Principal{Kind: auth.KindAuditTrails, Organization: "acme"}, 0},
		{"an owner's user token", &auth.Principal{Kind: auth.KindUser, UserID: "user-1", Orgs: []string{"acme"}, Owns: []string{"acme"}}, core.KindForbidden},
		{"a site admin", &auth.Principal{Kind: auth.KindUser, UserID: "user-2", SiteAdmin: true}, core.KindForbidden},
		{"the owners team's token", &auth.Principal{Kind: auth.KindTeam, TeamID: "team-1", Organization: "acme", OwnersTeam: true}, core.KindForbidden},
		{"a run token", &auth.Principal{Kind: auth.KindRun, RunID: "run-1", WorkspaceID: "ws-1", Organization: "acme"}, core.KindForbidden},
		{"no token", nil, core.KindUnauthorized},
	} {
		err := s.Decide(ctx, c.p, authz.OrgReadAuditTrail, acme)
		if c.want == 0 && err != nil {
			t.Errorf("%s: refused (%v), want allowed", c.who, err)
		}
		if c.want != 0 && core.KindOf(err) != c.want {
			t.Errorf("%s: got %v, want a %v error", c.who, err, c.want)
		}
	}
}
