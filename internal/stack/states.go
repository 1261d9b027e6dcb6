package stack

import (
	"context"
	"net/http"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/tfeapi"
)

// States reads the state versions of deployments' workspaces, with the
// caller's rights (the state domain provides it).
type States interface {
	// Current returns a workspace's current state version, or a
	// not-found error when it has none.
	Current(ctx context.Context, workspaceID string) (StateInfo, error)
	// Get returns a state version.
	Get(ctx context.Context, id string) (StateInfo, error)
	// Description returns a state version's JSON description.
	Description(ctx context.Context, id string) ([]byte, error)
}

// StateInfo is a state version as a stack state shows it.
type StateInfo struct {
	ID          string
	WorkspaceID string
	Serial      int64
	Resources   int
	CreatedAt   time.Time
}

// State is a deployment's state (go-tfe's StackState): the state version
// of the deployment's workspace.
type State struct {
	StateInfo
	StackID    string
	Deployment string
	IsCurrent  bool
}

// ListStates returns the current state of each deployment of a stack that
// has one.
func (s *Service) ListStates(ctx context.Context, stackID string) ([]*State, error) {
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, err
	}
	if s.states == nil {
		return nil, nil
	}
	deps, err := store.All(ctx, s.db, func(sc store.Scanner) ([2]string, error) {
		var p [2]string
		return p, sc.Scan(&p[0], &p[1])
	}, `SELECT name, workspace_id FROM stack_deployments WHERE stack_id = ? AND workspace_id <> '' ORDER BY name`, stackID)
	if err != nil {
		return nil, err
	}
	var out []*State
	for _, d := range deps {
		info, err := s.states.Current(ctx, d[1])
		if core.KindOf(err) == core.KindNotFound {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, &State{StateInfo: info, StackID: stackID, Deployment: d[0], IsCurrent: true})
	}
	return out, nil
}

// GetState returns a state version of a deployment of a stack.
func (s *Service) GetState(ctx context.Context, id string) (*State, error) {
	if s.states == nil || !core.HasPrefix(id, "sv") {
		return nil, core.NotFound("stack state %q not found", id)
	}
	info, err := s.states.Get(ctx, id)
	if err != nil {
		return nil, core.NotFound("stack state %q not found", id)
	}
	var stackID, name string
	err = s.db.QueryRow(ctx, `SELECT stack_id, name FROM stack_deployments WHERE workspace_id = ?`, info.WorkspaceID).Scan(&stackID, &name)
	if store.IsNoRows(err) {
		return nil, core.NotFound("stack state %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if _, err := s.GetStack(ctx, stackID); err != nil {
		return nil, core.NotFound("stack state %q not found", id)
	}
	st := &State{StateInfo: info, StackID: stackID, Deployment: name}
	if cur, err := s.states.Current(ctx, info.WorkspaceID); err == nil {
		st.IsCurrent = cur.ID == info.ID
	}
	return st, nil
}

type jsonState struct {
	ID                    string             `jsonapi:"primary,stack-states"`
	Generation            int64              `jsonapi:"attr,generation"`
	Status                string             `jsonapi:"attr,status"`
	Deployment            string             `jsonapi:"attr,deployment"`
	Components            []ComponentSummary `jsonapi:"attr,components"`
	IsCurrent             bool               `jsonapi:"attr,is-current"`
	ResourceInstanceCount int                `jsonapi:"attr,resource-instance-count"`
	Stack                 *jsonStackRef      `jsonapi:"relation,stack"`
}

func stateJSON(st *State) *jsonState {
	return &jsonState{ID: st.ID, Generation: st.Serial, Status: "finalized", Deployment: st.Deployment, Components: []ComponentSummary{},
		IsCurrent: st.IsCurrent, ResourceInstanceCount: st.Resources, Stack: &jsonStackRef{ID: st.StackID}}
}

func (a *API) registerStates(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v2/stacks/{id}/stack-states", handle(a.listStates))
	mux.HandleFunc("GET /api/v2/stack-states/{id}", handle(a.getState))
	mux.HandleFunc("GET /api/v2/stack-states/{id}/description", handle(a.stateDescription))
}

func (a *API) listStates(w http.ResponseWriter, r *http.Request) error {
	page, err := tfeapi.ParsePage(r)
	if err != nil {
		return err
	}
	states, err := a.Service.ListStates(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	states, pg := tfeapi.Paginate(states, page)
	out := make([]*jsonState, 0, len(states))
	for _, st := range states {
		out = append(out, stateJSON(st))
	}
	tfeapi.RespondList(w, r, out, pg)
	return nil
}

func (a *API) getState(w http.ResponseWriter, r *http.Request) error {
	st, err := a.Service.GetState(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	tfeapi.Respond(w, r, http.StatusOK, stateJSON(st))
	return nil
}

func (a *API) stateDescription(w http.ResponseWriter, r *http.Request) error {
	st, err := a.Service.GetState(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	b, err := a.Service.states.Description(r.Context(), st.ID)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
	return nil
}
