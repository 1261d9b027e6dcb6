package server

import (
	"context"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/project"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/team"
	"github.com/terracehq/terrace/internal/workspace"
)

// notifySubscribables shows the notify domain the workspaces, teams and
// projects that configurations hang on.
type notifySubscribables struct {
	ws       *workspace.Service
	teams    *team.Service
	projects *project.Service
}

func (a notifySubscribables) Organization(ctx context.Context, kind, id string) (string, error) {
	switch kind {
	case notify.OnWorkspace:
		w, err := a.ws.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return w.Organization, nil
	case notify.OnTeam:
		t, err := a.teams.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return t.Organization, nil
	case notify.OnProject:
		p, err := a.projects.Get(ctx, id)
		if err != nil {
			return "", err
		}
		return p.Organization, nil
	}
	return "", core.NotFound("%s %q not found", kind, id)
}

// Lock takes the row of the workspace (the one the run queue takes), team
// or project for notify's count of its configurations.
func (a notifySubscribables) Lock(ctx context.Context, q store.Q, kind, id string) error {
	switch kind {
	case notify.OnWorkspace:
		return a.ws.LockIn(ctx, q, id)
	case notify.OnTeam:
		return a.teams.LockIn(ctx, q, id)
	case notify.OnProject:
		return a.projects.LockIn(ctx, q, id)
	}
	return core.NotFound("%s %q not found", kind, id)
}

// wireNotify builds the notification service and subscribes it to runs.
func (s *Server) wireNotify() error {
	var err error
	s.Notify, err = notify.NewService(notify.Options{
		DB: s.DB, Logger: s.logger.With("component", "notify"), BaseURL: s.BaseURL, Keys: s.Keys,
		Subscribables: notifySubscribables{s.Workspaces, s.Teams, s.Projects},
		SMTP:          s.mailServer,
		UserEmails:    s.Auth.NotifiedEmails,
	})
	if err != nil {
		return err
	}
	s.Runs.Observe(s.Notify.RunTransition)
	s.Workspaces.OnDelete = append(s.Workspaces.OnDelete, notify.DeleteSubscribable)
	s.Projects.OnDelete = append(s.Projects.OnDelete, notify.DeleteSubscribable)
	return nil
}
