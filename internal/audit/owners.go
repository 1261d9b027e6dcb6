package audit

import (
	"context"

	"github.com/terracehq/terrace/internal/authz"
)

// ListOrganization returns an organization's events to those who manage
// it (its owners and site admins), for the web UI's audit trail page; the
// API keeps List for organization and audit-trails tokens.
func (s *Service) ListOrganization(ctx context.Context, org string, f Filter) ([]*Event, int, error) {
	if err := authz.Allows(ctx, authz.OrgManage, authz.Resource{Organization: org}); err != nil {
		return nil, 0, err
	}
	id, err := s.orgs.IDByName(ctx, org)
	if err != nil {
		return nil, 0, err
	}
	f.AllOrganizations, f.OrganizationID = false, id
	return listEvents(ctx, s.db, f)
}
