// Package trigger keeps run triggers: declared edges from a source
// workspace to a target workspace, so that a successful apply in the
// source queues a run in the target (auto-applied only when the target
// sets auto-apply-run-trigger). A trigger that would close a cycle is
// refused, so no apply can start an endless chain.
package trigger

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// Prefix prefixes run trigger IDs.
const Prefix = "rt"

// MaxSources is how many source workspaces a workspace may have.
const MaxSources = 20

// Source and trigger reason of the runs a trigger queues.
const (
	RunSource = "tfe-run-trigger"
	RunReason = "run_trigger"
)

// Trigger is a declared edge: an apply in Sourceable queues a run in
// Workspace.
type Trigger struct {
	ID             string
	Organization   string
	WorkspaceID    string
	WorkspaceName  string
	SourceableID   string
	SourceableName string
	CreatedAt      time.Time
}

// Workspace is a workspace as triggers see it.
type Workspace struct {
	ID, Name, Organization string
	AutoApply              bool
	AutoApplyRunTrigger    bool
}

// Workspaces finds workspaces: Get for a caller in ctx (core.NotFound when
// it may not see it), System without a caller.
type Workspaces interface {
	Get(ctx context.Context, id string) (*Workspace, error)
	System(ctx context.Context, id string) (*Workspace, error)
}

// Options configure a Service.
type Options struct {
	DB         *store.DB
	Workspaces Workspaces
	// CreateRun queues a run; the run domain's Create.
	CreateRun func(ctx context.Context, o run.CreateOptions) (*run.Run, error)
	// Outputs returns a workspace's current outputs, name to value
	// (sensitive ones included: only their digests are kept).
	Outputs func(ctx context.Context, workspaceID string) (map[string][]byte, error)
	// RunConfig returns the configuration version archive (tar.gz) a run
	// executes, from which a derived edge learns which outputs the
	// consumer reads (nil, or an error: every output).
	RunConfig func(ctx context.Context, runID string) ([]byte, error)
	// Speculative reports whether a run is plan-only (speculative plans
	// and health assessments); nil: none is.
	Speculative func(ctx context.Context, runID string) (bool, error)
	Logger      *slog.Logger
	// MaxFanOut bounds how many runs one origin apply may queue, over the
	// whole chain. Defaults to 500.
	MaxFanOut int
	// Retries is how many times a failed run creation is tried again
	// (with doubling waits from 100ms) before it is reported. Defaults to 3.
	Retries int
	// Hold is how long a queued fan-out waits before the loop starts its
	// runs (0: at once). Fault tests use it to kill the server while a
	// fan-out is queued.
	Hold time.Duration
}

// Service manages run triggers and fires them.
type Service struct {
	o       Options
	fanOuts *outbox.Queue // the fan-out queue (fanout.go)
}

// NewService validates o and returns a service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Workspaces == nil || o.CreateRun == nil || o.Outputs == nil {
		return nil, errors.New("trigger: DB, Workspaces, CreateRun and Outputs are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxFanOut <= 0 {
		o.MaxFanOut = 500
	}
	if o.Retries <= 0 {
		o.Retries = 3
	}
	s := &Service{o: o}
	var err error
	s.fanOuts, err = s.newFanOutQueue()
	return s, err
}

// authorize is the one decision for managing a workspace's run triggers and
// dependency settings, asked of the authorization model: changing the
// target workspace's settings.
func authorize(ctx context.Context, org, workspaceID string) error {
	return authz.Allows(ctx, authz.WorkspaceUpdate, authz.Resource{Organization: org, WorkspaceID: workspaceID})
}

// authorizeRead decides seeing a workspace's run triggers (a trigger named
// by ID is its target workspace's): reading that workspace, what the
// route of its trigger list needs.
func authorizeRead(ctx context.Context, org, workspaceID string) error {
	return authz.Allows(ctx, authz.WorkspaceRead, authz.Resource{Organization: org, WorkspaceID: workspaceID})
}

// authorizeSource decides naming a workspace as the source of a trigger:
// as in HCP Terraform, reading its runs (whose applies will queue runs in
// the target).
func authorizeSource(ctx context.Context, org, workspaceID string) error {
	return authz.Allows(ctx, authz.RunRead, authz.Resource{Organization: org, WorkspaceID: workspaceID})
}

type edge struct {
	id, org, target, source string
	created                 int64
}

func scanEdge(sc interface{ Scan(...any) error }) (edge, error) {
	var e edge
	err := sc.Scan(&e.id, &e.org, &e.target, &e.source, &e.created)
	return e, err
}

const cols = `id, organization_name, workspace_id, sourceable_id, created_at`

func (s *Service) fill(ctx context.Context, e edge) (*Trigger, error) {
	t := &Trigger{ID: e.id, Organization: e.org, WorkspaceID: e.target, SourceableID: e.source, CreatedAt: core.FromMicros(e.created)}
	for _, p := range []struct {
		id   string
		name *string
	}{{e.target, &t.WorkspaceName}, {e.source, &t.SourceableName}} {
		w, err := s.o.Workspaces.System(ctx, p.id)
		if err != nil {
			return nil, err
		}
		*p.name = w.Name
	}
	return t, nil
}

// Create declares that applies in sourceID queue runs in workspaceID.
func (s *Service) Create(ctx context.Context, workspaceID, sourceID string) (*Trigger, error) {
	target, err := s.o.Workspaces.Get(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := authorize(ctx, target.Organization, target.ID); err != nil {
		return nil, err
	}
	if sourceID == "" {
		return nil, core.Invalid("sourceable is required")
	}
	// A source the caller may not read is not found, as one that does
	// not exist (HCP Terraform answers 404 for both).
	source, err := s.o.Workspaces.Get(ctx, sourceID)
	if err != nil || source.Organization != target.Organization || authorizeSource(ctx, source.Organization, source.ID) != nil {
		return nil, core.NotFound("source workspace %q not found", sourceID)
	}
	if source.ID == target.ID {
		return nil, core.Invalid("a workspace cannot trigger itself")
	}
	e := edge{id: core.NewID(Prefix), org: target.Organization, target: target.ID, source: source.ID, created: core.Micros(core.Now())}
	err = s.o.DB.Tx(ctx, func(tx *store.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM run_triggers WHERE workspace_id = ?`, target.ID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxSources {
			return core.Invalid("workspace %q already has %d source workspaces, the most it may have", target.Name, MaxSources)
		}
		if path, err := s.pathFrom(ctx, tx, target.ID, source.ID); err != nil {
			return err
		} else if path {
			return core.Invalid("a run trigger from %q to %q would close a cycle: %q already triggers runs that lead to %q", source.Name, target.Name, target.Name, source.Name)
		}
		_, err := tx.Exec(ctx, `INSERT INTO run_triggers (`+cols+`) VALUES (?, ?, ?, ?, ?)`, e.id, e.org, e.target, e.source, e.created)
		if store.IsUniqueViolation(tx, err) {
			return core.Invalid("workspace %q already has a run trigger from %q", target.Name, source.Name)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return s.fill(ctx, e)
}

// pathFrom reports whether runs triggered in from lead, through declared
// triggers and (fired) derived edges, to to.
func (s *Service) pathFrom(ctx context.Context, q store.Q, from, to string) (bool, error) {
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == to {
			return true, nil
		}
		next, err := store.All(ctx, q, func(sc interface{ Scan(...any) error }) (string, error) {
			var id string
			return id, sc.Scan(&id)
		}, `SELECT workspace_id FROM run_triggers WHERE sourceable_id = ? UNION SELECT consumer_id FROM derived_edges WHERE producer_id = ? AND cycle = ?`, cur, cur, false)
		if err != nil {
			return false, err
		}
		for _, n := range next {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		}
	}
	return false, nil
}

// List returns a workspace's inbound triggers (its sources) or outbound
// ones (the workspaces it triggers).
func (s *Service) List(ctx context.Context, workspaceID, direction string) ([]*Trigger, error) {
	col := map[string]string{"inbound": "workspace_id", "outbound": "sourceable_id"}[direction]
	if col == "" {
		return nil, core.Invalid("filter[run-trigger][type] must be inbound or outbound")
	}
	if _, err := s.o.Workspaces.Get(ctx, workspaceID); err != nil {
		return nil, err
	}
	edges, err := store.All(ctx, s.o.DB, scanEdge, `SELECT `+cols+` FROM run_triggers WHERE `+col+` = ? ORDER BY created_at, id`, workspaceID)
	if err != nil {
		return nil, err
	}
	out := make([]*Trigger, 0, len(edges))
	for _, e := range edges {
		t, err := s.fill(ctx, e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Get returns a trigger whose target the caller may read.
func (s *Service) Get(ctx context.Context, id string) (*Trigger, error) {
	if !core.HasPrefix(id, Prefix) {
		return nil, core.NotFound("run trigger %q not found", id)
	}
	e, err := scanEdge(s.o.DB.QueryRow(ctx, `SELECT `+cols+` FROM run_triggers WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("run trigger %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := authorizeRead(ctx, e.org, e.target); err != nil {
		return nil, core.NotFoundAs(err, "run trigger %q not found", id)
	}
	return s.fill(ctx, e)
}

// Delete removes a trigger.
func (s *Service) Delete(ctx context.Context, id string) error {
	t, err := s.Get(ctx, id)
	if err != nil {
		return err
	}
	if err := authorize(ctx, t.Organization, t.WorkspaceID); err != nil {
		return err
	}
	_, err = s.o.DB.Exec(ctx, `DELETE FROM run_triggers WHERE id = ?`, t.ID)
	return err
}

// system acts for Terrace itself when queueing triggered runs.
func system(ctx context.Context) context.Context {
	return auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
}
