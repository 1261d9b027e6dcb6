package run

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

func insertRun(ctx context.Context, q store.Q, r *Run) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, assessment, plan_id, apply_id, created_at, updated_at, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.WorkspaceID, r.Organization, r.ConfigurationVersionID, string(r.Status), r.PlanOnly, r.Assessment, r.Plan.ID, r.Apply.ID, core.Micros(r.CreatedAt), core.Micros(r.UpdatedAt), string(doc))
	if err != nil || r.Assessment {
		return err
	}
	// The workspace's run count, for the total of an unfiltered list.
	_, err = q.Exec(ctx, `INSERT INTO run_counts (workspace_id, runs) VALUES (?, 1)
		ON CONFLICT (workspace_id) DO UPDATE SET runs = run_counts.runs + 1`, r.WorkspaceID)
	return err
}

func updateRun(ctx context.Context, q store.Q, r *Run) error {
	doc, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE runs SET status = ?, organization_name = ?, updated_at = ?, doc = ? WHERE id = ?`,
		string(r.Status), r.Organization, core.Micros(r.UpdatedAt), string(doc), r.ID)
	return err
}

func scanRun(sc interface{ Scan(...any) error }) (*Run, error) {
	var doc string
	if err := sc.Scan(&doc); err != nil {
		return nil, err
	}
	r := &Run{}
	if err := json.Unmarshal([]byte(doc), r); err != nil {
		return nil, fmt.Errorf("decoding run: %w", err)
	}
	if r.Timestamps == nil {
		r.Timestamps = Stamps{}
	}
	return r, nil
}

// getRun reads a run by a column (id, plan_id or apply_id), optionally
// locking it for update inside a transaction.
func getRun(ctx context.Context, q store.Q, col, id string, lock bool) (*Run, error) {
	query := `SELECT doc FROM runs WHERE ` + col + ` = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	r, err := scanRun(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("run %s not found", id)
	}
	return r, err
}

func listRuns(ctx context.Context, q store.Q, where string, args ...any) ([]*Run, error) {
	return store.All(ctx, q, scanRun, `SELECT doc FROM runs WHERE `+where, args...)
}

// Event is an entry of a run's history.
type Event struct {
	ID          string
	RunID       string
	Action      string
	Description string
	Actor       string
	CreatedAt   int64
	CommentID   string // set for "commented" events
}

func addEvent(ctx context.Context, q store.Q, runID, action, description, actor string) error {
	_, err := q.Exec(ctx, `INSERT INTO run_events (id, run_id, action, description, actor, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		core.NewID(prefixEvent), runID, action, description, actor, core.Micros(core.Now()))
	return err
}

const eventCols = `id, run_id, action, description, actor, created_at, comment_id`

func scanEvent(sc interface{ Scan(...any) error }) (*Event, error) {
	var e Event
	if err := sc.Scan(&e.ID, &e.RunID, &e.Action, &e.Description, &e.Actor, &e.CreatedAt, &e.CommentID); err != nil {
		return nil, err
	}
	return &e, nil
}

func listEvents(ctx context.Context, q store.Q, runID string) ([]*Event, error) {
	return store.All(ctx, q, scanEvent, `SELECT `+eventCols+` FROM run_events WHERE run_id = ? ORDER BY created_at, id`, runID)
}
