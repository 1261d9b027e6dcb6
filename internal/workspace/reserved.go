package workspace

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/store"
)

// ReservedTagKey is a tag binding key an organization reserves. Reserved
// keys are offered to whoever tags projects and workspaces; one with
// DisableOverrides also keeps workspaces from overriding their project's
// binding of the key (see checkOverrides and EffectiveTagBindings), as in
// HCP Terraform.
type ReservedTagKey struct {
	ID               string
	Organization     string
	Key              string
	DisableOverrides bool
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// ReservedTagKeyOptions are the attributes of a new or changed reserved
// key; nil fields are absent.
type ReservedTagKeyOptions struct {
	Key              *string
	DisableOverrides *bool
}

const reservedCols = `id, organization_name, tag_key, disable_overrides, created_at, updated_at`

func scanReserved(sc store.Scanner) (*ReservedTagKey, error) {
	var k ReservedTagKey
	var created, updated int64
	if err := sc.Scan(&k.ID, &k.Organization, &k.Key, &k.DisableOverrides, &created, &updated); err != nil {
		return nil, err
	}
	k.CreatedAt, k.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &k, nil
}

// validReservedKey words a bad key as HCP Terraform does ("Key is
// invalid"), with the rule that tag binding keys follow.
func validReservedKey(key string) error {
	if !project.ValidTagKey(key) {
		return core.Invalid("Key is invalid: %q is not a tag binding key (a key is %s)", key, project.TagKeyRule)
	}
	return nil
}

func requireManageReserved(ctx context.Context, org string) error {
	return authz.Allows(ctx, authz.OrgManageReservedTagKeys, authz.Resource{Organization: org})
}

// ReservedTagKeys lists an organization's reserved tag keys, oldest first:
// at most limit (all when negative) from offset on, and how many there are.
func (s *Service) ReservedTagKeys(ctx context.Context, org string, offset, limit int) ([]*ReservedTagKey, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	if _, err := s.projects.DefaultID(ctx, org); err != nil {
		return nil, 0, core.NotFoundAs(err, "organization %q not found", org)
	}
	return store.Page(ctx, s.db, scanReserved, reservedCols, `reserved_tag_keys`, `organization_name = ?`, `created_at, id`, offset, limit, org)
}

// CreateReservedTagKey reserves a key in an organization.
func (s *Service) CreateReservedTagKey(ctx context.Context, org string, o ReservedTagKeyOptions) (*ReservedTagKey, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := requireManageReserved(ctx, org); err != nil {
		return nil, err
	}
	// Every organization has its default project: none, no organization.
	if _, err := s.projects.DefaultID(ctx, org); err != nil {
		return nil, core.NotFoundAs(err, "organization %q not found", org)
	}
	if o.Key == nil || *o.Key == "" {
		return nil, core.Invalid("Key is required")
	}
	if err := validReservedKey(*o.Key); err != nil {
		return nil, err
	}
	now := core.Now()
	k := &ReservedTagKey{ID: core.NewID(core.PrefixReservedTagKey), Organization: org, Key: *o.Key, CreatedAt: now, UpdatedAt: now}
	if o.DisableOverrides != nil {
		k.DisableOverrides = *o.DisableOverrides
	}
	_, err := s.db.Exec(ctx, `INSERT INTO reserved_tag_keys (`+reservedCols+`) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, org, k.Key, k.DisableOverrides, core.Micros(now), core.Micros(now))
	if store.IsUniqueViolation(s.db, err) {
		return nil, core.Invalid("Key has already been taken: organization %q already reserves %q", org, k.Key)
	}
	if err != nil {
		return nil, err
	}
	return k, nil
}

// reservedRow reads a reserved key without looking at the caller,
// locking its row in a transaction.
func reservedRow(ctx context.Context, q store.Q, id string) (*ReservedTagKey, error) {
	if !core.HasPrefix(id, core.PrefixReservedTagKey) {
		return nil, core.NotFound("reserved tag key %q not found", id)
	}
	k, err := scanReserved(q.QueryRow(ctx, `SELECT `+reservedCols+` FROM reserved_tag_keys WHERE id = ?`+store.ForUpdate(q), id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("reserved tag key %q not found", id)
	}
	return k, err
}

// loadReserved reads a reserved key whose organization the caller may
// see (404 otherwise).
func (s *Service) loadReserved(ctx context.Context, id string) (*ReservedTagKey, error) {
	k, err := reservedRow(ctx, s.db, id)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgRead, authz.Resource{Organization: k.Organization}); err != nil {
		return nil, core.NotFoundAs(err, "reserved tag key %q not found", id)
	}
	return k, nil
}

// ReservedTagKeyOrganization returns the organization of a reserved key
// the caller may see.
func (s *Service) ReservedTagKeyOrganization(ctx context.Context, id string) (string, error) {
	k, err := s.loadReserved(ctx, id)
	if err != nil {
		return "", err
	}
	return k.Organization, nil
}

// manageableReserved reads a reserved key the caller may change: 404 when
// it cannot see it, 403 when it may not manage reserved keys. The model
// decides before any transaction (it reads the store).
func (s *Service) manageableReserved(ctx context.Context, id string) (*ReservedTagKey, error) {
	k, err := s.loadReserved(ctx, id)
	if err != nil {
		return nil, err
	}
	return k, requireManageReserved(ctx, k.Organization)
}

// UpdateReservedTagKey renames a reserved key and/or turns its overrides
// on or off. Renaming keeps the bindings of the old key as they are: they
// are ordinary bindings from then on.
func (s *Service) UpdateReservedTagKey(ctx context.Context, id string, o ReservedTagKeyOptions) (*ReservedTagKey, error) {
	if _, err := s.manageableReserved(ctx, id); err != nil {
		return nil, err
	}
	if o.Key != nil {
		if err := validReservedKey(*o.Key); err != nil {
			return nil, err
		}
	}
	var out *ReservedTagKey
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		k, err := reservedRow(ctx, tx, id)
		if err != nil {
			return err
		}
		if o.Key != nil {
			k.Key = *o.Key
		}
		if o.DisableOverrides != nil {
			k.DisableOverrides = *o.DisableOverrides
		}
		k.UpdatedAt = core.Now()
		_, err = tx.Exec(ctx, `UPDATE reserved_tag_keys SET tag_key = ?, disable_overrides = ?, updated_at = ? WHERE id = ?`,
			k.Key, k.DisableOverrides, core.Micros(k.UpdatedAt), k.ID)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("Key has already been taken: organization %q already reserves %q", k.Organization, k.Key)
		}
		if err != nil {
			return err
		}
		out = k
		return nil
	})
	return out, err
}

// DeleteReservedTagKey releases a reserved key; bindings of the key stay.
func (s *Service) DeleteReservedTagKey(ctx context.Context, id string) error {
	k, err := s.manageableReserved(ctx, id)
	if err != nil {
		return err
	}
	res, err := s.db.Exec(ctx, `DELETE FROM reserved_tag_keys WHERE id = ?`, k.ID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return core.NotFound("reserved tag key %q not found", id)
	}
	return nil
}

// lockedKeys returns the keys of org reserved with overrides disabled.
func lockedKeys(ctx context.Context, q store.Q, org string) (map[string]bool, error) {
	keys, err := store.Strings(ctx, q, `SELECT tag_key FROM reserved_tag_keys WHERE organization_name = ? AND disable_overrides = ?`, org, true)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}

// lockedKeySQL is a condition over a workspace's row ws that holds when
// the tag key (its first argument) is reserved in the workspace's
// organization with overrides disabled (its second argument, true).
const lockedKeySQL = `EXISTS (SELECT 1 FROM reserved_tag_keys r WHERE r.organization_name = ws.organization_name AND r.tag_key = ? AND r.disable_overrides = ?)`

// checkOverrides refuses (422) bindings that would override, with another
// value, the binding of w's project for a key reserved with overrides
// disabled. It reads through q, the transaction writing the bindings.
func (s *Service) checkOverrides(ctx context.Context, q store.Q, w *Workspace, bs []TagBinding) error {
	if len(bs) == 0 {
		return nil
	}
	locked, err := lockedKeys(ctx, q, w.Organization)
	if err != nil || len(locked) == 0 {
		return err
	}
	hit := false
	for _, b := range bs {
		hit = hit || locked[b.Key]
	}
	if !hit {
		return nil
	}
	p, err := s.projects.WorkspaceProject(ctx, q, w.ProjectID)
	if err != nil {
		return err
	}
	inherited := map[string]string{}
	for _, b := range p.TagBindings {
		inherited[b.Key] = b.Value
	}
	for _, b := range bs {
		if v, ok := inherited[b.Key]; ok && locked[b.Key] && v != b.Value {
			return core.Invalid("tag binding key %q is reserved with overrides disabled: this workspace inherits %q = %q from project %q and cannot override it",
				b.Key, b.Key, v, p.Name)
		}
	}
	return nil
}
