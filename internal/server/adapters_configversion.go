package server

import (
	"context"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/workspace"
)

// configVersionWorkspaces shows workspaces to the configuration version domain.
type configVersionWorkspaces struct{ ws *workspace.Service }

func (a configVersionWorkspaces) Get(ctx context.Context, id string) (*configversion.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &configversion.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization}, nil
}

// CheckQueueRun asks the authorization model, which also computes the
// workspace's advertised can-queue-run, for creating and archiving
// configuration versions.
func (a configVersionWorkspaces) CheckQueueRun(ctx context.Context, w *configversion.Workspace) error {
	if err := authz.Allows(ctx, authz.RunPlan, authz.Resource{Organization: w.Organization, WorkspaceID: w.ID}); err != nil {
		if core.KindOf(err) == core.KindForbidden {
			return core.Forbidden("you may not queue runs in workspace %q", w.Name)
		}
		return err
	}
	return nil
}

// workspaceConfigs tells the workspace domain its current configuration version.
type workspaceConfigs struct{ db *store.DB }

func (c workspaceConfigs) CurrentConfigurationVersionID(ctx context.Context, workspaceID string) (string, error) {
	return configversion.CurrentID(ctx, c.db, workspaceID)
}

func (workspaceConfigs) CurrentConfigurationVersionIDSQL() string {
	return configversion.CurrentIDSQL()
}
