package run

import (
	"context"

	"github.com/terracehq/terrace/internal/auth"
)

// Latest is the newest run of a workspace, as a list shows it.
type Latest struct {
	ID     string
	Status Status
}

// LatestByWorkspace returns the newest run (health assessments left out)
// of every workspace of an organization that has one, in one query: what a
// workspace list shows beside each workspace.
func (s *Service) LatestByWorkspace(ctx context.Context, org string) (map[string]Latest, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	rows, err := s.DB.Query(ctx, `SELECT workspace_id, id, status FROM runs WHERE organization_name = ? AND assessment = ? ORDER BY workspace_id, created_at DESC, id DESC`, org, false)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]Latest{}
	prev := ""
	for rows.Next() {
		var ws, id, status string
		if err := rows.Scan(&ws, &id, &status); err != nil {
			return nil, err
		}
		if ws == prev {
			continue
		}
		prev = ws
		out[ws] = Latest{ID: id, Status: Status(status)}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}
