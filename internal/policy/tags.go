package policy

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/store"
)

// MaxTagSelectors bounds the tag selectors of one policy set (inclusions
// and exclusions together).
const MaxTagSelectors = 100

// TagSelector chooses workspaces by their tag bindings. An inclusion
// (Exclude false) applies a non-global set to every matching workspace of
// its organization; an exclusion exempts a matching workspace from the
// set, global or not. Value nil is a key-only selector: as in HCP
// Terraform (its provider's tfe_tag_policy_set), it matches only a
// key-only binding of the key, not the key with a value.
type TagSelector struct {
	Key     string
	Value   *string
	Exclude bool
}

// Tag is one of a workspace's effective tag bindings (its own and those
// it inherits from its project); Value is "" for a key-only binding.
type Tag struct {
	Key, Value string
}

// matches reports whether one of tags is the selector's key and value
// (none for a key-only selector).
func (t TagSelector) matches(tags []Tag) bool {
	for _, b := range tags {
		if b.Key == t.Key && t.storedValue() == b.Value {
			return true
		}
	}
	return false
}

// storedValue is the tag_value column: "" for a key-only selector.
func (t TagSelector) storedValue() string {
	if t.Value == nil {
		return ""
	}
	return *t.Value
}

// checkSelectors validates selectors as tag bindings are validated (the
// key rule of internal/project, values of at most 256 characters) and
// normalises them: an empty value is a key-only selector, as an empty
// binding value is a key-only binding. Errors name the selector by its
// place in the request, from 1.
func checkSelectors(sels []TagSelector) ([]TagSelector, error) {
	if len(sels) > MaxTagSelectors {
		return nil, core.Invalid("a policy set may have at most %d tag selectors; %d were given", MaxTagSelectors, len(sels))
	}
	out := make([]TagSelector, len(sels))
	for i, t := range sels {
		if t.Key == "" {
			return nil, core.Invalid("tag selector %d: tag-key is required", i+1)
		}
		if !project.ValidTagKey(t.Key) {
			return nil, core.Invalid("tag selector %d: tag-key %q is invalid: a key is %s", i+1, t.Key, project.TagKeyRule)
		}
		if t.Value != nil && *t.Value == "" {
			t.Value = nil
		}
		if t.Value != nil && !project.ValidTagValue(*t.Value) {
			return nil, core.Invalid("tag selector %d: tag-value %q is invalid: a value is %s", i+1, *t.Value, project.TagValueRule)
		}
		out[i] = t
	}
	return out, nil
}

// addSelectors stores selectors of a set (one already stored is left as
// it is) and checks the set stays within MaxTagSelectors.
func addSelectors(ctx context.Context, q store.Q, setID string, sels []TagSelector) error {
	now := core.Micros(core.Now())
	for i, t := range sels {
		if _, err := q.Exec(ctx, `INSERT INTO policy_set_tag_selectors (policy_set_id, is_exclude, tag_key, tag_value, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			setID, t.Exclude, t.Key, t.storedValue(), now+int64(i)); err != nil {
			return err
		}
	}
	var n int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM policy_set_tag_selectors WHERE policy_set_id = ?`, setID).Scan(&n); err != nil {
		return err
	}
	if n > MaxTagSelectors {
		return core.Invalid("a policy set may have at most %d tag selectors; this change would leave it %d", MaxTagSelectors, n)
	}
	return nil
}

// ChangeTagSelectors adds selectors to a set (one it has already is no
// change) or removes them (one it does not have is no change). A
// selector is its key, its value (or none) and whether it excludes.
func (s *Service) ChangeTagSelectors(ctx context.Context, id string, sels []TagSelector, add bool) error {
	set, err := s.managedSet(ctx, id)
	if err != nil {
		return err
	}
	if len(sels) == 0 {
		return core.Invalid("at least one tag selector is required")
	}
	if sels, err = checkSelectors(sels); err != nil {
		return err
	}
	return s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		// Lock the set's row: two concurrent additions cannot both pass
		// the limit.
		if _, err := tx.Exec(ctx, `UPDATE policy_sets SET updated_at = ? WHERE id = ?`, core.Micros(core.Now()), set.ID); err != nil {
			return err
		}
		if add {
			return addSelectors(ctx, tx, set.ID, sels)
		}
		for _, t := range sels {
			if _, err := tx.Exec(ctx, `DELETE FROM policy_set_tag_selectors WHERE policy_set_id = ? AND is_exclude = ? AND tag_key = ? AND tag_value = ?`,
				set.ID, t.Exclude, t.Key, t.storedValue()); err != nil {
				return err
			}
		}
		return nil
	})
}

// replaceSelectors makes sels the set's only selectors.
func replaceSelectors(ctx context.Context, q store.Q, setID string, sels []TagSelector) error {
	if _, err := q.Exec(ctx, `DELETE FROM policy_set_tag_selectors WHERE policy_set_id = ?`, setID); err != nil {
		return err
	}
	return addSelectors(ctx, q, setID, sels)
}

// fillSelectors reads the selectors of sets (by ID), one statement for all.
func fillSelectors(ctx context.Context, q store.Q, byID map[string]*Set, list string, args []any) error {
	rows, err := q.Query(ctx, `SELECT policy_set_id, is_exclude, tag_key, tag_value FROM policy_set_tag_selectors WHERE policy_set_id IN (`+list+`) ORDER BY is_exclude, tag_key, tag_value`, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var setID, value string
		var t TagSelector
		if err := rows.Scan(&setID, &t.Exclude, &t.Key, &value); err != nil {
			return err
		}
		if value != "" {
			t.Value = &value
		}
		byID[setID].TagSelectors = append(byID[setID].TagSelectors, t)
	}
	return rows.Err()
}
