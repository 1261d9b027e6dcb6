package workspace

import (
	"context"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/store"
)

// ProjectIDSQL is a scalar subquery giving the project ID of the workspace
// whose ID is the SQL expression idExpr (NULL when there is none), for
// another domain's one-statement read (the run read takes its workspace's
// project with it for the authorization guard).
func ProjectIDSQL(idExpr string) string {
	return `SELECT ws_p.project_id FROM workspaces ws_p WHERE ws_p.id = ` + idExpr
}

// NameLikeSQL is a condition over a workspace ID written as the SQL
// expression idExpr that holds when the workspace's name, in lowercase,
// is LIKE the one argument it takes (a pattern whose literal parts went
// through store.EscapeLike): another domain's search by workspace name
// (the admin run list's).
func NameLikeSQL(idExpr string) string {
	return idExpr + ` IN (SELECT ws_n.id FROM workspaces ws_n WHERE LOWER(ws_n.name) LIKE ?` + store.LikeEscape + `)`
}

// ReadableSQL is a condition over a workspace ID written as the SQL
// expression idExpr, with its arguments, that holds for the workspaces of
// org the caller in ctx may read: the workspace list's rule
// (authz.ReadableWorkspaces), for another domain's list of what belongs to
// workspaces (an organization's runs) to select in SQL, so that its pages
// and counts hold only what the caller may see. cond is "" when the caller
// may read every workspace of org. each, when not nil, is the test to apply
// to each workspace instead: the model decides the caller's reach
// workspace by workspace (a run token's).
func (s *Service) ReadableSQL(ctx context.Context, org, idExpr string) (cond string, args []any, each func(workspaceID string) bool, err error) {
	where, args, byOne, err := authz.ReadableWorkspaces(ctx, org)
	if err != nil {
		return "", nil, nil, err
	}
	if byOne != nil {
		return "", nil, func(id string) bool {
			w, err := s.System(ctx, id)
			return err == nil && w.Organization == org && byOne(w.ProjectID, w.ID)
		}, nil
	}
	if where == "" {
		return "", nil, nil, nil
	}
	return idExpr + ` IN (SELECT ws.id FROM workspaces ws WHERE ws.organization_name = ? AND ` + where + `)`,
		append([]any{org}, args...), nil, nil
}
