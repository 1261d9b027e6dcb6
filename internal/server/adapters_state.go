package server

import (
	"context"
	"database/sql"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/state"
	"github.com/terracehq/terrace/internal/workspace"
)

// stateWorkspaces gives the state domain what it needs of workspaces.
// reads, when set, hears of every state read a run makes of another
// workspace (derived dependencies, internal/trigger).
type stateWorkspaces struct {
	ws    *workspace.Service
	reads *func(ctx context.Context, producerID, consumerID, runID string)
}

func toStateWorkspace(w *workspace.Workspace) *state.Workspace {
	return &state.Workspace{ID: w.ID, Name: w.Name, Organization: w.Organization, LockedBy: w.LockID}
}

// check applies the remote-state rule to run tokens: a run sees its own
// workspace's state and that of workspaces sharing state with it.
func (a stateWorkspaces) check(ctx context.Context, w *workspace.Workspace) (*state.Workspace, error) {
	if p := auth.FromContext(ctx); p != nil && p.Kind == auth.KindRun && p.WorkspaceID != w.ID {
		ok, err := a.ws.CanReadStateOf(ctx, p.WorkspaceID, w.ID)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, core.NotFound("workspace %q not found", w.ID)
		}
		if a.reads != nil && *a.reads != nil {
			(*a.reads)(ctx, w.ID, p.WorkspaceID, p.RunID)
		}
	}
	return toStateWorkspace(w), nil
}

func (a stateWorkspaces) Get(ctx context.Context, id string) (*state.Workspace, error) {
	w, err := a.ws.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return a.check(ctx, w)
}

func (a stateWorkspaces) GetByName(ctx context.Context, org, name string) (*state.Workspace, error) {
	w, err := a.ws.GetByName(ctx, org, name)
	if err != nil {
		return nil, err
	}
	return a.check(ctx, w)
}

// workspaceState gives the workspace domain what it needs of state.
type workspaceState struct {
	states *state.Service
	ws     *workspace.Service
}

func (a workspaceState) CurrentStateVersionID(ctx context.Context, workspaceID string) (string, error) {
	return a.states.CurrentStateVersionID(ctx, workspaceID)
}

func (workspaceState) CurrentStateVersionIDSQL() string { return state.CurrentStateVersionIDSQL() }

func (a workspaceState) ResourceCount(ctx context.Context, workspaceID string) (int, error) {
	return a.states.ResourceCount(ctx, workspaceID)
}

// StateSummaryColumns and StateSummaryOf give a workspace read its state
// summary in its document's statement (workspace.StateSummarySQL).
func (workspaceState) StateSummaryColumns() []string { return state.CurrentSummarySQL() }

func (a workspaceState) StateSummaryOf(ctx context.Context, workspaceID, id string, vals []sql.NullString) (workspace.StateSummary, error) {
	n, outputs, err := state.SummaryOf(vals)
	if err != nil {
		return workspace.StateSummary{}, err
	}
	if outputs, err = visibleOutputs(ctx, a, workspaceID, outputs); err != nil {
		return workspace.StateSummary{}, err
	}
	sum := workspace.StateSummary{CurrentStateVersionID: id, ResourceCount: n, Outputs: make([]workspace.Output, len(outputs))}
	for i, o := range outputs {
		sum.Outputs[i] = workspace.Output{ID: o}
	}
	return sum, nil
}

// StateSummary gives a workspace read its state in one call (see
// workspace.StateSummarizer), with sensitive output values removed.
func (a workspaceState) StateSummary(ctx context.Context, workspaceID string) (workspace.StateSummary, error) {
	id, n, outs, err := a.states.CurrentSummary(ctx, workspaceID)
	if err != nil {
		return workspace.StateSummary{}, err
	}
	if outs, err = visibleOutputs(ctx, a, workspaceID, outs); err != nil {
		return workspace.StateSummary{}, err
	}
	sum := workspace.StateSummary{CurrentStateVersionID: id, ResourceCount: n, Outputs: make([]workspace.Output, 0, len(outs))}
	for _, o := range outs {
		w := workspace.Output{ID: o.ID, Name: o.Name, Sensitive: o.Sensitive, Type: o.Type}
		if !o.Sensitive {
			w.Value = o.Value
		}
		sum.Outputs = append(sum.Outputs, w)
	}
	return sum, nil
}

// visibleOutputs returns a workspace's outputs as the caller may see
// them in its document, none where it may not: outputs are state, which a
// run token sees only where the remote-state rule lets it read the state
// (as CurrentOutputs). Both summaries, the document's and the domain's,
// ask it.
func visibleOutputs[T any](ctx context.Context, a workspaceState, workspaceID string, outs []T) ([]T, error) {
	if len(outs) == 0 {
		return outs, nil
	}
	_, err := (stateWorkspaces{ws: a.ws}).check(ctx, &workspace.Workspace{ID: workspaceID})
	switch {
	case core.KindOf(err) == core.KindNotFound:
		return nil, nil
	case err != nil:
		return nil, err
	}
	return outs, nil
}

// CurrentOutputs lists the current outputs with sensitive values removed.
func (a workspaceState) CurrentOutputs(ctx context.Context, workspaceID string) ([]workspace.Output, error) {
	outs, err := a.states.CurrentOutputs(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	res := make([]workspace.Output, 0, len(outs))
	for _, o := range outs {
		w := workspace.Output{ID: o.ID, Name: o.Name, Sensitive: o.Sensitive, Type: o.Type}
		if !o.Sensitive {
			w.Value = o.Value
		}
		res = append(res, w)
	}
	return res, nil
}
