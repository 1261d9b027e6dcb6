package server

import (
	"context"

	"github.com/terracehq/terrace/internal/organization"
)

// registryOrgs tells the registry whether an organization exists.
type registryOrgs struct{ orgs *organization.Service }

func (a registryOrgs) Exists(ctx context.Context, name string) error {
	_, err := a.orgs.Get(ctx, name)
	return err
}
