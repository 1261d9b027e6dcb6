package retention

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// Workspace is a workspace as the enforcer sees it.
type Workspace struct {
	ID, Organization string
	// Own is the workspace's own policy (none: the organization's).
	Own Policy
}

// Enforcer deletes what the policies say is too old.
type Enforcer struct {
	// Workspaces lists, each with its own policy, the workspaces of orgs
	// and those with a policy of their own: every workspace a policy may
	// apply to.
	Workspaces func(ctx context.Context, orgs []string) ([]Workspace, error)
	// Organizations returns the policies of the organizations that have
	// one.
	Organizations func(ctx context.Context) (map[string]Policy, error)
	// States deletes the content of a workspace's state versions created
	// before cutoff but the current one; Configurations archives its
	// configuration versions created before cutoff but the current one
	// and those an active run uses. Each returns how many it changed.
	States, Configurations func(ctx context.Context, workspaceID string, cutoff time.Time) (int, error)
	Logger                 *slog.Logger
}

// Result says what one pass did.
type Result struct {
	Workspaces, StateVersions, ConfigurationVersions int
}

// Enforce makes one pass over every workspace under a delete-older
// policy, at now. A workspace that fails is reported and the others go
// on.
func (e *Enforcer) Enforce(ctx context.Context, now time.Time) (Result, error) {
	var res Result
	orgs, err := e.Organizations(ctx)
	if err != nil {
		return res, fmt.Errorf("reading the organizations' data retention policies: %w", err)
	}
	names := make([]string, 0, len(orgs))
	for name := range orgs {
		names = append(names, name)
	}
	wss, err := e.Workspaces(ctx, names)
	if err != nil {
		return res, fmt.Errorf("reading the workspaces' data retention policies: %w", err)
	}
	var errs []error
	for _, ws := range wss {
		cutoff, ok := Effective(ws.Own, orgs[ws.Organization]).Cutoff(now)
		if !ok {
			continue
		}
		res.Workspaces++
		n, err := e.States(ctx, ws.ID, cutoff)
		res.StateVersions += n
		if err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: state versions: %w", ws.ID, err))
		}
		n, err = e.Configurations(ctx, ws.ID, cutoff)
		res.ConfigurationVersions += n
		if err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: configuration versions: %w", ws.ID, err))
		}
		if ctx.Err() != nil {
			break
		}
	}
	return res, errors.Join(errs...)
}

// Run enforces the policies first after first, then every interval, until
// ctx ends: a loop on the server's lifecycle, run once per cluster. The
// first pass comes soon after a start, so that a server restarted more
// often than interval still enforces.
func (e *Enforcer) Run(ctx context.Context, first, interval time.Duration) {
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(interval)
		res, err := e.Enforce(ctx, core.Now())
		if err != nil && ctx.Err() == nil {
			e.Logger.Warn("data retention", "error", err)
		}
		if res.StateVersions+res.ConfigurationVersions > 0 {
			e.Logger.Info("data retention deleted old backing data", "workspaces", res.Workspaces,
				"state_versions", res.StateVersions, "configuration_versions", res.ConfigurationVersions)
		}
	}
}
