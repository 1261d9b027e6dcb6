package server

import (
	"context"

	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/variable"
	"github.com/terracehq/terrace/internal/workspace"
)

// variableWorkspaces shows workspaces to the variable domain.
type variableWorkspaces struct{ ws *workspace.Service }

func (a variableWorkspaces) Get(ctx context.Context, id string) (*variable.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &variable.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization, ProjectID: w.ProjectID}, nil
}

// WorkspaceProjectSQL says a workspace's project in SQL
// (variable.WorkspaceProjectSQL).
func (a variableWorkspaces) WorkspaceProjectSQL(idExpr string) string {
	return workspace.ProjectIDSQL(idExpr)
}

// variableProjects shows projects to the variable domain.
type variableProjects struct{ projects *project.Service }

func (a variableProjects) Get(ctx context.Context, id string) (string, error) {
	p, err := a.projects.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return p.Organization, nil
}
