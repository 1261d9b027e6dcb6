package server

import (
	"context"

	"github.com/terracehq/terrace/internal/runtask"
	"github.com/terracehq/terrace/internal/workspace"
)

// runTaskWorkspaces shows the run task domain the workspaces tasks attach
// to.
type runTaskWorkspaces struct{ ws *workspace.Service }

func (a runTaskWorkspaces) Organization(ctx context.Context, id string) (string, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return "", err
	}
	return w.Organization, nil
}

// wireRunTasks builds the run task service.
func (s *Server) wireRunTasks() error {
	var err error
	s.RunTasks, err = runtask.NewService(runtask.Options{
		DB: s.DB, Workspaces: runTaskWorkspaces{s.Workspaces}, AgentPools: s.AgentPools,
		Logger: s.logger.With("component", "runtask"), BaseURL: s.BaseURL,
	})
	return err
}
