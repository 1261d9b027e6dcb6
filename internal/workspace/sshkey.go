package workspace

import (
	"context"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// AssignSSHKey sets the SSH key the workspace's runs use; keyID "" removes
// it. The key must belong to the workspace's organization: a missing key,
// one the caller cannot see and one from another organization are refused
// alike (422).
func (s *Service) AssignSSHKey(ctx context.Context, id, keyID string) (*Workspace, error) {
	err := s.checkedTx(ctx, id, requireManageWorkspace, func(tx *store.Tx, w *Workspace) error {
		if keyID != "" {
			if s.SSHKeys == nil {
				return core.Invalid("SSH keys are not supported by this server")
			}
			// The lookup locks the key's row until this transaction ends,
			// so a concurrent delete cannot leave a dangling reference.
			org, err := s.SSHKeys.Organization(ctx, tx, keyID)
			if err != nil && core.KindOf(err) != core.KindNotFound {
				return err
			}
			if err != nil || org != w.Organization {
				// 422 like an unknown agent pool: the workspace exists, the
				// key named in the body does not (for this caller).
				return core.Invalid("SSH key %q not found in organization %q", keyID, w.Organization)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE workspaces SET ssh_key_id = ?, updated_at = ? WHERE id = ?`,
			keyID, core.Micros(core.Now()), w.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.Get(ctx, id)
}

// ClearSSHKey unassigns a key from every workspace that uses it; the SSH
// key domain runs it inside the transaction that deletes the key.
func ClearSSHKey(ctx context.Context, q store.Q, keyID string) error {
	if _, err := q.Exec(ctx, `UPDATE workspaces SET ssh_key_id = '' WHERE ssh_key_id = ?`, keyID); err != nil {
		return fmt.Errorf("unassigning SSH key %s from workspaces: %w", keyID, err)
	}
	return nil
}
