package workspace

// ProjectIDSQL is a scalar subquery giving the project ID of the workspace
// whose ID is the SQL expression idExpr (NULL when there is none), for
// another domain's one-statement read (the run read takes its workspace's
// project with it for the authorization guard).
func ProjectIDSQL(idExpr string) string {
	return `SELECT ws_p.project_id FROM workspaces ws_p WHERE ws_p.id = ` + idExpr
}
