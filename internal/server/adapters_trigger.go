package server

import (
	"context"
	"io"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"

	"github.com/terracehq/terrace/internal/trigger"
	"github.com/terracehq/terrace/internal/workspace"
)

// triggerWorkspaces shows workspaces to the trigger domain.
type triggerWorkspaces struct{ ws *workspace.Service }

func toTriggerWorkspace(w *workspace.Workspace) *trigger.Workspace {
	return &trigger.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization,
		AutoApply: w.Settings.AutoApply, AutoApplyRunTrigger: w.Settings.AutoApplyRunTrigger}
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
		Outputs: s.currentOutputs, Logger: s.logger.With("component", "trigger"), RunConfig: s.runConfig,
		Hold: s.cfg.TriggerHold,
		Speculative: func(ctx context.Context, runID string) (bool, error) {
			r, err := s.Runs.System(ctx, runID)
			if err != nil {
				return false, err
			}
			return r.PlanOnly, nil
		},
	})
	if err != nil {
		return err
	}
	s.Runs.Observe(s.Triggers.RunTransition)
	s.remoteStateRead = func(ctx context.Context, producerID, consumerID, runID string) {
		if err := s.Triggers.RecordRead(context.WithoutCancel(ctx), producerID, consumerID, runID); err != nil {
			s.logger.Warn("recording a remote state read", "producer", producerID, "consumer", consumerID, "run", runID, "error", err)
		}
	}
	return nil
}

// runConfig reads the configuration version archive a run executes, for
// the trigger domain (which outputs a consumer reads).
func (s *Server) runConfig(ctx context.Context, runID string) ([]byte, error) {
	r, err := s.Runs.System(ctx, runID)
	if err != nil {
		return nil, err
	}
	rc, _, err := s.ConfigVersions.OpenArchiveUnchecked(ctx, r.ConfigurationVersionID)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(io.LimitReader(rc, 64<<20))
}

// currentOutputs reads a workspace's current outputs for the trigger
// domain, acting for the system: values go no further than a digest.
func (s *Server) currentOutputs(ctx context.Context, workspaceID string) (map[string][]byte, error) {
	sys := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
	outs, err := s.States.CurrentOutputs(sys, workspaceID)
	if core.KindOf(err) == core.KindNotFound {
		return map[string][]byte{}, nil // no state yet: no outputs
	}
	if err != nil {
		return nil, err
	}
	m := make(map[string][]byte, len(outs))
	for _, o := range outs {
		m[o.Name] = o.Value
	}
	return m, nil
}
