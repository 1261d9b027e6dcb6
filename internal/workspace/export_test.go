package workspace

import (
	"context"

	"github.com/terracehq/terrace/internal/store"
)

// CheckedTx is checkedTx, for the tests of package workspace_test.
func (s *Service) CheckedTx(ctx context.Context, id string, check func(context.Context, *Workspace) error, fn func(*store.Tx, *Workspace) error) error {
	return s.checkedTx(ctx, id, check, fn)
}
