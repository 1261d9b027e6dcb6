package run

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
)

// Latest is the newest run of a workspace, as a list shows it.
type Latest struct {
	ID     string
	Status Status
}

// LatestByWorkspace returns the newest run (health assessments left out)
// of each of the organization's workspaces named that has one, in one
// query: what a page of a workspace list shows beside each workspace.
func (s *Service) LatestByWorkspace(ctx context.Context, org string, workspaceIDs []string) (map[string]Latest, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, err
	}
	out := map[string]Latest{}
	if len(workspaceIDs) == 0 {
		return out, nil
	}
	args := []any{false}
	for _, id := range workspaceIDs {
		args = append(args, id)
	}
	in := strings.TrimSuffix(strings.Repeat("?,", len(workspaceIDs)), ",")
	rows, err := s.DB.Query(ctx, `SELECT workspace_id, id, status, organization_name FROM runs WHERE assessment = ? AND workspace_id IN (`+in+`) ORDER BY workspace_id, created_at DESC, id DESC`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	prev := ""
	for rows.Next() {
		var ws, id, status, runOrg string
		if err := rows.Scan(&ws, &id, &status, &runOrg); err != nil {
			return nil, err
		}
		// Filtered here, not in SQL, so that the query uses the
		// workspace index.
		if ws == prev || runOrg != org {
			continue
		}
		prev = ws
		out[ws] = Latest{ID: id, Status: Status(status)}
	}
	return out, rows.Err()
}
