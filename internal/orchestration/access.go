package orchestration

import (
	"context"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
)

// Who may do what here. Every decision asks the authorization model
// (authz.Allows):
//
//   - every request: authz.OrgRead in the organization. Run, agent and
//     task-result tokens have no use for the orchestrator and are refused
//     by it on every endpoint.
//   - configuration objects: reading them authz.OrgRead, changing them
//     authz.OrgManageOrchestrator (owners and the organization's token).
//
// Without a model in the context (the service used on its own) only
// owners pass authz.Allows.

// canRead lets the caller into the organization's orchestrator.
func (s *Service) canRead(ctx context.Context, org string) error {
	// The organization check refuses user tokens where the organization
	// disabled them and answers 404 for other organizations.
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: org}); err != nil {
		return err
	}
	if s.Orgs != nil {
		return s.Orgs.Exists(ctx, org)
	}
	return nil
}

// canWrite: configuration objects are the platform team's.
func (s *Service) canWrite(ctx context.Context, org string) error {
	if err := s.canRead(ctx, org); err != nil {
		return err
	}
	return authz.Allows(ctx, authz.OrgManageOrchestrator, authz.Resource{Organization: org})
}
