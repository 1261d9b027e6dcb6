package server

import (
	"context"

	"github.com/terracehq/terrace/internal/organization"
)

// sshKeyOrgs tells the SSH key domain whether an organization exists.
type sshKeyOrgs struct{ orgs *organization.Service }

func (a sshKeyOrgs) Check(ctx context.Context, name string) error {
	_, err := a.orgs.Get(ctx, name)
	return err
}
