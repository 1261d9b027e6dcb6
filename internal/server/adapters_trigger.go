package server

import (
	"context"

	"github.com/terracehq/terrace/internal/trigger"
	"github.com/terracehq/terrace/internal/workspace"
)

// triggerWorkspaces shows workspaces to the trigger domain.
type triggerWorkspaces struct{ ws *workspace.Service }

func toTriggerWorkspace(w *workspace.Workspace) *trigger.Workspace {
	return &trigger.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization, AutoApplyRunTrigger: w.Settings.AutoApplyRunTrigger}
}

func (a triggerWorkspaces) Get(ctx context.Context, id string) (*trigger.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return toTriggerWorkspace(w), nil
}

func (a triggerWorkspaces) System(ctx context.Context, id string) (*trigger.Workspace, error) {
	w, err := a.ws.System(ctx, id)
	if err != nil {
		return nil, err
	}
	return toTriggerWorkspace(w), nil
}

// wireTriggers builds the run trigger service and subscribes it to runs.
func (s *Server) wireTriggers() error {
	var err error
	s.Triggers, err = trigger.NewService(trigger.Options{
		DB: s.DB, Workspaces: triggerWorkspaces{s.Workspaces}, CreateRun: s.Runs.Create,
		Logger: s.logger.With("component", "trigger"),
	})
	if err != nil {
		return err
	}
	s.Runs.Observe(s.Triggers.RunTransition)
	return nil
}
