package state

import (
	"context"
	"database/sql"
	"log/slog"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ResourcesPage returns limit of the managed resource instances in the
// current state of a workspace the caller may read, from offset on, how
// many there are, and the version (nil, with none, when the workspace has
// no state). The first listing of a version parses its state and keeps
// the instances in the store, in the state's order (migration 1042); every
// page after that, of any size, is one index range of them, however large
// the state: before, each page read and parsed the whole state.
func (s *Service) ResourcesPage(ctx context.Context, workspaceID string, offset, limit int) ([]*Resource, int, *Version, error) {
	v, err := s.Current(ctx, workspaceID)
	if core.KindOf(err) == core.KindNotFound {
		if _, werr := s.workspace(ctx, workspaceID); werr != nil {
			return nil, 0, nil, werr
		}
		return []*Resource{}, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, err
	}
	offset, limit = max(offset, 0), max(limit, 0)
	var total int
	err = s.db.QueryRow(ctx, `SELECT total FROM state_version_resource_lists WHERE state_version_id = ?`, v.ID).Scan(&total)
	if err == nil {
		if offset >= total || limit == 0 {
			return []*Resource{}, total, v, nil
		}
		rs, err := store.All(ctx, s.db, scanResource, `SELECT id, address, name, module, provider, type, name_index
			FROM state_version_resources WHERE state_version_id = ? ORDER BY seq LIMIT ? OFFSET ?`, v.ID, limit, offset)
		return rs, total, v, err
	}
	if !store.IsNoRows(err) {
		return nil, 0, nil, err
	}
	b, err := s.blobs.Get(ctx, v.StateKey)
	if err != nil {
		return nil, 0, nil, err
	}
	rs, err := parseResources(v.WorkspaceID, b)
	if err != nil {
		return nil, 0, nil, err
	}
	if err := s.keepResources(context.WithoutCancel(ctx), v.ID, rs); err != nil {
		// This listing is answered from the parse; the next one tries again.
		slog.Warn("keeping a state version's resources for the next listing", "state_version", v.ID, "error", err)
	}
	start, end := min(offset, len(rs)), min(offset+limit, len(rs))
	return rs[start:end:end], len(rs), v, nil
}

// resourceRows is how many instances one INSERT writes: 9 values each,
// well under either store's limit on a statement's parameters.
const resourceRows = 200

// keepResources stores the instances of version id, all of them or (on
// error) none. When another request has stored them first, it stores
// nothing.
func (s *Service) keepResources(ctx context.Context, id string, rs []*Resource) error {
	return s.db.Tx(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `INSERT INTO state_version_resource_lists (state_version_id, total) VALUES (?, ?)
			ON CONFLICT (state_version_id) DO NOTHING`, id, len(rs))
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return err
		}
		for start := 0; start < len(rs); start += resourceRows {
			batch := rs[start:min(start+resourceRows, len(rs))]
			args := make([]any, 0, 9*len(batch))
			for i, r := range batch {
				var index any
				if r.HasIndex {
					index = r.NameIndex
				}
				args = append(args, id, start+i, r.ID, r.Address, r.Name, r.Module, r.Provider, r.Type, index)
			}
			values := strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?, ?, ?), ", len(batch)), ", ")
			if _, err := tx.Exec(ctx, `INSERT INTO state_version_resources (state_version_id, seq, id, address, name, module, provider, type, name_index) VALUES `+values, args...); err != nil {
				return err
			}
		}
		return nil
	})
}

func scanResource(sc store.Scanner) (*Resource, error) {
	var r Resource
	var index sql.NullString
	if err := sc.Scan(&r.ID, &r.Address, &r.Name, &r.Module, &r.Provider, &r.Type, &index); err != nil {
		return nil, err
	}
	r.NameIndex, r.HasIndex = index.String, index.Valid
	return &r, nil
}
