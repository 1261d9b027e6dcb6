// Package assessment runs health assessments (drift detection): for every
// workspace with assessments enabled (its own assessments-enabled, or its
// organization's assessments-enforced), a refresh-only plan on a schedule
// or on request, executed by the same runner code as runs but from a queue
// of its own. The result (drifted or not, which resources, checks) is kept
// per workspace and shown as HCP Terraform's assessment-results; a result
// that newly drifts, newly fails checks or fails sends assessment:*
// notifications through the notification outbox. docs/design/assessments.md
// describes the lifecycle.
package assessment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/notify"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/store"
)

// PrefixResult starts assessment result IDs.
const PrefixResult = "asmtres"

// Status is where an assessment is; moves is the whole lifecycle.
type Status string

const (
	Queued    Status = "queued"    // its run is queued or planning
	Succeeded Status = "succeeded" // the refresh-only plan finished (final)
	Errored   Status = "errored"   // the plan errored or was canceled (final)
)

var moves = map[Status][]Status{Queued: {Succeeded, Errored}}

func allowed(from, to Status) bool {
	for _, s := range moves[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Result is one assessment of a workspace.
type Result struct {
	ID, WorkspaceID, Organization, RunID string
	Status                               Status
	Drifted, Succeeded                   bool
	ErrorMsg                             string
	ResourcesDrifted, ResourcesUndrifted int
	ChecksPassed, ChecksFailed           int
	ChecksErrored, ChecksUnknown         int
	DriftedResources                     []string // addresses, as terraform reports them in resource_drift
	CreatedAt, UpdatedAt                 time.Time
}

// Workspace is what assessments need to know about a workspace.
type Workspace struct {
	ID, Name, Organization, ProjectID string
	// Enabled: the workspace's assessments-enabled, or its
	// organization's assessments-enforced.
	Enabled bool
}

// Workspaces is the workspace domain as assessments see it.
type Workspaces interface {
	// Get returns a workspace the caller in ctx may see (404 otherwise).
	Get(ctx context.Context, id string) (*Workspace, error)
	// System returns a workspace without an access check.
	System(ctx context.Context, id string) (*Workspace, error)
	// Enabled lists every workspace with assessments enabled.
	Enabled(ctx context.Context) ([]*Workspace, error)
}

// Runs is the run domain as assessments see it.
type Runs interface {
	CreateAssessment(ctx context.Context, workspaceID string, prepare func(ctx context.Context, q store.Q, r *run.Run) error) (*run.Run, error)
	PlanBlob(ctx context.Context, planID, name string) ([]byte, error)
}

// Notifier sends assessment notifications (internal/notify).
type Notifier interface {
	Assessment(ctx context.Context, e notify.AssessmentEvent) error
}

// Options configure a Service.
type Options struct {
	DB         *store.DB
	Workspaces Workspaces
	Runs       Runs
	Notify     Notifier
	Logger     *slog.Logger
	// Interval is how long after a workspace's last assessment the
	// scheduler starts the next. Defaults to 24h.
	Interval time.Duration
}

// Service keeps assessments and schedules them.
type Service struct {
	o Options
	// finished is signalled after each assessment is recorded (tests and
	// the scheduler's callers may wait on it through Finished).
	finished chan string
}

// NewService validates o and returns a service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Workspaces == nil || o.Runs == nil || o.Notify == nil {
		return nil, errors.New("assessment: DB, Workspaces, Runs and Notify are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Interval <= 0 {
		o.Interval = 24 * time.Hour
	}
	return &Service{o: o, finished: make(chan string, 16)}, nil
}

// Finished returns a channel that receives the ID of each assessment
// result as it is recorded (dropped when nobody listens).
func (s *Service) Finished() <-chan string { return s.finished }

const cols = `id, workspace_id, organization_name, run_id, status, drifted, succeeded, error_msg, resources_drifted, resources_undrifted, checks_passed, checks_failed, checks_errored, checks_unknown, drifted_resources, created_at, updated_at`

func scan(sc interface{ Scan(...any) error }) (*Result, error) {
	var r Result
	var drifted string
	var created, updated int64
	if err := sc.Scan(&r.ID, &r.WorkspaceID, &r.Organization, &r.RunID, &r.Status, &r.Drifted, &r.Succeeded, &r.ErrorMsg,
		&r.ResourcesDrifted, &r.ResourcesUndrifted, &r.ChecksPassed, &r.ChecksFailed, &r.ChecksErrored, &r.ChecksUnknown,
		&drifted, &created, &updated); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(drifted), &r.DriftedResources); err != nil {
		return nil, fmt.Errorf("decoding assessment result %s: %w", r.ID, err)
	}
	if r.DriftedResources == nil {
		r.DriftedResources = []string{}
	}
	r.CreatedAt, r.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &r, nil
}

// Start queues an assessment of a workspace now, for a caller who may
// queue plans there. Assessments must be enabled for the workspace, and
// one at a time runs per workspace.
func (s *Service) Start(ctx context.Context, workspaceID string) (*Result, error) {
	w, err := s.o.Workspaces.Get(ctx, workspaceID)
	if err != nil {
		return nil, err
	}
	if err := authz.Allows(ctx, authz.RunPlan, authz.Resource{Organization: w.Organization, WorkspaceID: w.ID}); err != nil {
		return nil, err
	}
	if !w.Enabled {
		return nil, core.Invalid("health assessments are not enabled for workspace %q: set its assessments-enabled (or the organization's assessments-enforced) first", w.Name)
	}
	return s.queue(ctx, w)
}

// queue creates the assessment run and its result row in one transaction;
// a workspace with an assessment still queued gets a conflict.
func (s *Service) queue(ctx context.Context, w *Workspace) (*Result, error) {
	var res *Result
	_, err := s.o.Runs.CreateAssessment(ctx, w.ID, func(ctx context.Context, q store.Q, r *run.Run) error {
		var n int
		if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM assessment_results WHERE workspace_id = ? AND status = ?`, w.ID, string(Queued)).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return core.Conflict("workspace %q already has a health assessment in progress", w.Name)
		}
		now := core.Now()
		res = &Result{ID: core.NewID(PrefixResult), WorkspaceID: w.ID, Organization: w.Organization, RunID: r.ID, Status: Queued,
			DriftedResources: []string{}, CreatedAt: now, UpdatedAt: now}
		_, err := q.Exec(ctx, `INSERT INTO assessment_results (id, workspace_id, organization_name, run_id, status, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			res.ID, res.WorkspaceID, res.Organization, res.RunID, string(res.Status), core.Micros(now), core.Micros(now))
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Get returns an assessment result the caller may see (its workspace's
// readers may).
func (s *Service) Get(ctx context.Context, id string) (*Result, error) {
	if !core.HasPrefix(id, PrefixResult) {
		return nil, core.NotFound("assessment result %q not found", id)
	}
	r, err := scan(s.o.DB.QueryRow(ctx, `SELECT `+cols+` FROM assessment_results WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("assessment result %q not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := s.canRead(ctx, r.WorkspaceID); err != nil {
		if core.KindOf(err) == core.KindNotFound || core.KindOf(err) == core.KindForbidden {
			return nil, core.NotFound("assessment result %q not found", id)
		}
		return nil, err
	}
	return r, nil
}

func (s *Service) canRead(ctx context.Context, workspaceID string) error {
	w, err := s.o.Workspaces.Get(ctx, workspaceID)
	if err != nil {
		return err
	}
	return authz.Allows(ctx, authz.WorkspaceRead, authz.Resource{Organization: w.Organization, WorkspaceID: w.ID})
}

// List returns at most limit (all when negative) of a workspace's
// assessments, newest first, from offset on, and how many it has.
func (s *Service) List(ctx context.Context, workspaceID string, offset, limit int) ([]*Result, int, error) {
	if err := s.canRead(ctx, workspaceID); err != nil {
		return nil, 0, err
	}
	return store.Page(ctx, s.o.DB, scan, cols, "assessment_results", `workspace_id = ?`, `created_at DESC, id DESC`, offset, limit, workspaceID)
}

// CurrentID is the workspace's newest finished assessment ("" when none),
// for the workspace's current-assessment-result relationship.
func (s *Service) CurrentID(ctx context.Context, workspaceID string) (string, error) {
	r, err := s.latestFinished(ctx, s.o.DB, workspaceID, "")
	if err != nil || r == nil {
		return "", err
	}
	return r.ID, nil
}

// CurrentIDSQL says CurrentID in SQL over a workspace's id written ws.id.
func CurrentIDSQL() string {
	return `SELECT id FROM assessment_results WHERE workspace_id = ws.id AND status <> '` + string(Queued) + `' ORDER BY created_at DESC, id DESC LIMIT 1`
}

// latestFinished is the workspace's newest finished result other than
// except (nil when none).
func (s *Service) latestFinished(ctx context.Context, q store.Q, workspaceID, except string) (*Result, error) {
	r, err := scan(q.QueryRow(ctx, `SELECT `+cols+` FROM assessment_results WHERE workspace_id = ? AND status <> ? AND id <> ? ORDER BY created_at DESC, id DESC LIMIT 1`,
		workspaceID, string(Queued), except))
	if store.IsNoRows(err) {
		return nil, nil
	}
	return r, err
}

// DeleteWorkspace removes a deleted workspace's results (a delete hook of
// the workspace domain; the foreign key cascades too).
func DeleteWorkspace(ctx context.Context, q store.Q, workspaceID string) error {
	_, err := q.Exec(ctx, `DELETE FROM assessment_results WHERE workspace_id = ?`, workspaceID)
	return err
}
