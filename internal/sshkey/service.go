package sshkey

import (
	"context"
	"errors"
	"fmt"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// Service manages SSH keys. Those who manage VCS settings or administer a
// workspace see an organization's keys (names only: authz.OrgReadSSHKeys);
// those who manage VCS settings create, change and delete them.
type Service struct {
	db   *store.DB
	orgs Organizations
	// OnDelete hooks run inside the delete transaction, after the key's row
	// is locked and before it is deleted.
	OnDelete []OnDelete
	// Keys seals values at rest (ValueColumn); nil stores them as given.
	Keys *seal.Keyring
}

// ValueColumn is the sealed column of this domain (seal.Keyring.Migrate
// seals rows written before encryption at rest).
var ValueColumn = seal.Column{Table: "ssh_keys", IDColumn: "id", Column: "value", Purpose: "ssh_keys.value"}

// Organizations checks that an organization exists and that the caller in
// ctx may see it (core.NotFound otherwise); the organization domain
// provides it.
type Organizations interface {
	Check(ctx context.Context, name string) error
}

// NewService returns an SSH key service.
func NewService(db *store.DB, orgs Organizations) *Service { return &Service{db: db, orgs: orgs} }

func (s *Service) checkOrganization(ctx context.Context, org string) error {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return err
	}
	return s.orgs.Check(ctx, org)
}

const cols = `id, organization_name, name, created_at, updated_at`

func scan(sc interface{ Scan(...any) error }) (*Key, error) {
	var k Key
	var created, updated int64
	if err := sc.Scan(&k.ID, &k.Organization, &k.Name, &created, &updated); err != nil {
		return nil, err
	}
	k.CreatedAt, k.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &k, nil
}

func requireOwner(ctx context.Context, org string) error {
	if authz.Allows(ctx, authz.OrgManageVCS, authz.Resource{Organization: org}) != nil {
		return core.Forbidden("you may not manage the SSH keys of organization %q", org)
	}
	return nil
}

// checkOwner asks requireOwner about key id's organization before a
// transaction changes the key: the authorization model may read the
// caller's teams, which inside the transaction would take a second
// connection (store.ErrConnInTx). A key never changes organization.
func (s *Service) checkOwner(ctx context.Context, id string) error {
	k, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return err
	}
	return requireOwner(ctx, k.Organization)
}

// redact keeps a driver error from carrying a key's value into a log.
func redact(err error, value string) error {
	if err == nil || value == "" {
		return err
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	return errors.New("database error (details withheld: the statement carried a secret)")
}

// List returns an organization's keys, oldest first.
func (s *Service) List(ctx context.Context, org string) ([]*Key, error) {
	if err := s.checkOrganization(ctx, org); err != nil {
		return nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT `+cols+` FROM ssh_keys WHERE organization_name = ? ORDER BY created_at, id`, org)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*Key{}
	for rows.Next() {
		k, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// Create adds a key to an organization.
func (s *Service) Create(ctx context.Context, org string, o Options) (*Key, error) {
	if err := s.checkOrganization(ctx, org); err != nil {
		return nil, err
	}
	if err := requireOwner(ctx, org); err != nil {
		return nil, err
	}
	if o.Name == nil {
		return nil, core.Invalid("name is required")
	}
	if err := validName(*o.Name); err != nil {
		return nil, err
	}
	if o.Value == nil {
		return nil, core.Invalid("value is required")
	}
	if err := validValue(*o.Value); err != nil {
		return nil, err
	}
	now := core.Now()
	k := &Key{ID: core.NewID(core.PrefixSSHKey), Organization: org, Name: *o.Name, CreatedAt: now, UpdatedAt: now}
	sealed, err := s.Keys.SealString(ValueColumn.Purpose, *o.Value)
	if err != nil {
		return nil, err
	}
	_, err = s.db.Exec(ctx, `INSERT INTO ssh_keys (id, organization_name, name, value, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		k.ID, org, k.Name, sealed, core.Micros(now), core.Micros(now))
	if err != nil {
		return nil, fmt.Errorf("creating SSH key %s: %w", k.ID, redact(err, *o.Value))
	}
	return k, nil
}

func (s *Service) load(ctx context.Context, q store.Q, id string, forUpdate bool) (*Key, error) {
	if !core.HasPrefix(id, core.PrefixSSHKey) {
		return nil, core.NotFound("SSH key %q not found", id)
	}
	query := `SELECT ` + cols + ` FROM ssh_keys WHERE id = ?`
	if forUpdate {
		query += store.ForUpdate(q)
	}
	k, err := scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("SSH key %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if !auth.FromContext(ctx).CanAccessOrganization(k.Organization) {
		return nil, core.NotFound("SSH key %q not found", id)
	}
	return k, nil
}

// Get returns a key the caller may read: what listing the organization's
// keys needs (authz.OrgReadSSHKeys); 404 when the caller cannot see its
// organization.
func (s *Service) Get(ctx context.Context, id string) (*Key, error) {
	k, err := s.load(ctx, s.db, id, false)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.OrgReadSSHKeys, authz.Resource{Organization: k.Organization}); err != nil {
		return nil, core.NotFoundAs(err, "SSH key %q not found", id)
	}
	return k, nil
}

// Update renames a key and/or replaces its value.
func (s *Service) Update(ctx context.Context, id string, o Options) (*Key, error) {
	if err := s.checkOwner(ctx, id); err != nil {
		return nil, err
	}
	var out *Key
	err := s.db.Tx(ctx, func(tx *store.Tx) error {
		k, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if o.Name != nil {
			if err := validName(*o.Name); err != nil {
				return err
			}
			k.Name = *o.Name
		}
		k.UpdatedAt = core.Now()
		if _, err := tx.Exec(ctx, `UPDATE ssh_keys SET name = ?, updated_at = ? WHERE id = ?`, k.Name, core.Micros(k.UpdatedAt), k.ID); err != nil {
			return err
		}
		if o.Value != nil {
			if err := validValue(*o.Value); err != nil {
				return err
			}
			sealed, err := s.Keys.SealString(ValueColumn.Purpose, *o.Value)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE ssh_keys SET value = ? WHERE id = ?`, sealed, k.ID); err != nil {
				return fmt.Errorf("updating SSH key %s: %w", k.ID, redact(err, *o.Value))
			}
		}
		out = k
		return nil
	})
	return out, err
}

// Delete removes a key; the OnDelete hooks drop every reference to it in
// the same transaction.
func (s *Service) Delete(ctx context.Context, id string) error {
	if err := s.checkOwner(ctx, id); err != nil {
		return err
	}
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		// Lock the row first: an assignment racing this delete either
		// commits before (and is cleared by the hooks) or waits and then
		// finds no key.
		k, err := s.load(ctx, tx, id, true)
		if err != nil {
			return err
		}
		for _, fn := range s.OnDelete {
			if err := fn(ctx, tx, k.ID); err != nil {
				return fmt.Errorf("deleting SSH key %s: %w", k.ID, err)
			}
		}
		_, err = tx.Exec(ctx, `DELETE FROM ssh_keys WHERE id = ?`, k.ID)
		return err
	})
}

// Organization returns the organization of a key the caller may see,
// locking the key's row when q is a transaction so that the key cannot be
// deleted before that transaction ends. Other domains use it to check a
// reference (a workspace's ssh-key) before storing it.
func (s *Service) Organization(ctx context.Context, q store.Q, id string) (string, error) {
	k, err := s.load(ctx, q, id, true)
	if err != nil {
		return "", err
	}
	return k.Organization, nil
}

// PrivateKey returns a key's value without checking the caller: it is for
// the runner (acting for the system) only, and its result must never be
// logged or returned by the API.
func (s *Service) PrivateKey(ctx context.Context, id string) (string, error) {
	var v string
	err := s.db.QueryRow(ctx, `SELECT value FROM ssh_keys WHERE id = ?`, id).Scan(&v)
	if store.IsNoRows(err) {
		return "", core.NotFound("SSH key %q not found", id)
	}
	if err != nil {
		return "", err
	}
	return s.Keys.OpenString(ValueColumn.Purpose, v)
}
