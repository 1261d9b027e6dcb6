package run

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// VariablesColumn holds a run's variables (RunCreateOptions.Variables and
// a stack deployment's inputs, some of them sensitive): sealed JSON, kept
// out of the doc so that the doc holds no secret. NULL for a run without
// variables.
var VariablesColumn = seal.Column{Table: "runs", IDColumn: "id", Column: "variables", Purpose: "runs.variables"}

// encodeRun returns the doc (without the variables) and the sealed
// variables (nil when there are none).
func encodeRun(keys *seal.Keyring, r *Run) (doc string, vars *string, err error) {
	d := *r
	d.Variables = nil
	b, err := json.Marshal(&d)
	if err != nil {
		return "", nil, err
	}
	if len(r.Variables) > 0 {
		v, err := json.Marshal(r.Variables)
		if err != nil {
			return "", nil, err
		}
		sealed, err := keys.SealString(VariablesColumn.Purpose, string(v))
		if err != nil {
			return "", nil, err
		}
		vars = &sealed
	}
	return string(b), vars, nil
}

func insertRun(ctx context.Context, q store.Q, keys *seal.Keyring, r *Run) error {
	doc, vars, err := encodeRun(keys, r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, assessment, plan_id, apply_id, created_at, updated_at, doc, variables) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		r.ID, r.WorkspaceID, r.Organization, r.ConfigurationVersionID, string(r.Status), r.PlanOnly, r.Assessment, r.Plan.ID, r.Apply.ID, core.Micros(r.CreatedAt), core.Micros(r.UpdatedAt), doc, vars)
	if err != nil || r.Assessment {
		return err
	}
	// The workspace's run count, for the total of an unfiltered list.
	_, err = q.Exec(ctx, `INSERT INTO run_counts (workspace_id, runs) VALUES (?, 1)
		ON CONFLICT (workspace_id) DO UPDATE SET runs = run_counts.runs + 1`, r.WorkspaceID)
	return err
}

// insertCreatedRun stores a run just created with its "created" event:
// on PostgreSQL in one statement (the run, its workspace's run count and
// the event: one round trip on the way from POST to plan instead of
// three), elsewhere as insertRun and addEvent do.
func insertCreatedRun(ctx context.Context, q store.Q, keys *seal.Keyring, r *Run, description string) error {
	if q.Driver().Name() != "postgres" || r.Assessment {
		if err := insertRun(ctx, q, keys, r); err != nil {
			return err
		}
		return addEvent(ctx, q, r.ID, "created", description, r.CreatedBy)
	}
	doc, vars, err := encodeRun(keys, r)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `WITH run AS (
			INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, assessment, plan_id, apply_id, created_at, updated_at, doc, variables)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)),
		counted AS (
			INSERT INTO run_counts (workspace_id, runs) VALUES (?, 1) ON CONFLICT (workspace_id) DO UPDATE SET runs = run_counts.runs + 1)
		INSERT INTO run_events (id, run_id, action, description, actor, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		r.ID, r.WorkspaceID, r.Organization, r.ConfigurationVersionID, string(r.Status), r.PlanOnly, r.Assessment, r.Plan.ID, r.Apply.ID, core.Micros(r.CreatedAt), core.Micros(r.UpdatedAt), doc, vars,
		r.WorkspaceID,
		core.NewID(prefixEvent), r.ID, "created", description, r.CreatedBy, core.Micros(core.Now()))
	return err
}

// updateRun writes r back. A run's variables never change after it is
// created, so the sealed column is written only by insertRun (and by
// SealVariables for runs stored before).
func updateRun(ctx context.Context, q store.Q, r *Run) error {
	doc, _, err := encodeRun(nil, r)
	if err != nil {
		return err
	}
	if doc == r.stored && q == r.storedIn {
		return nil // written in this transaction already, unchanged since (the columns come from the doc's fields)
	}
	_, err = q.Exec(ctx, `UPDATE runs SET status = ?, organization_name = ?, updated_at = ?, doc = ? WHERE id = ?`,
		string(r.Status), r.Organization, core.Micros(r.UpdatedAt), doc, r.ID)
	if err == nil {
		r.stored, r.storedIn = doc, q
	}
	return err
}

// write is one more statement to send along with a run's update.
type write struct {
	sql  string
	args []any
}

// updateRunWith writes r back (as updateRun does) together with more
// writes that do not depend on each other: on PostgreSQL in one
// statement, each write a data-modifying WITH (one round trip instead of
// one each), elsewhere one after the other.
func updateRunWith(ctx context.Context, q store.Q, r *Run, more ...write) error {
	if q.Driver().Name() != "postgres" || len(more) == 0 {
		if err := updateRun(ctx, q, r); err != nil {
			return err
		}
		for _, w := range more {
			if _, err := q.Exec(ctx, w.sql, w.args...); err != nil {
				return err
			}
		}
		return nil
	}
	doc, _, err := encodeRun(nil, r)
	if err != nil {
		return err
	}
	changed := doc != r.stored || q != r.storedIn
	if changed {
		more = append([]write{{`UPDATE runs SET status = ?, organization_name = ?, updated_at = ?, doc = ? WHERE id = ?`,
			[]any{string(r.Status), r.Organization, core.Micros(r.UpdatedAt), doc, r.ID}}}, more...)
	}
	// WITH w0 AS (…), w1 AS (…) <the last write>
	var with []string
	var args []any
	for i, w := range more[:len(more)-1] {
		with = append(with, fmt.Sprintf("w%d AS (%s)", i, w.sql))
		args = append(args, w.args...)
	}
	last := more[len(more)-1]
	q2 := last.sql
	if len(with) > 0 {
		q2 = "WITH " + strings.Join(with, ", ") + " " + last.sql
	}
	args = append(args, last.args...)
	if _, err := q.Exec(ctx, q2, args...); err != nil {
		return err
	}
	if changed {
		r.stored, r.storedIn = doc, q
	}
	return nil
}

const runCols = `doc, variables`

func scanRunWith(keys *seal.Keyring) func(sc store.Scanner) (*Run, error) {
	return func(sc store.Scanner) (*Run, error) {
		var doc string
		var vars sql.NullString
		if err := sc.Scan(&doc, &vars); err != nil {
			return nil, err
		}
		return decodeRun(keys, doc, vars)
	}
}

// decodeRun turns a run's doc and sealed variables column into the run.
func decodeRun(keys *seal.Keyring, doc string, vars sql.NullString) (*Run, error) {
	r := &Run{}
	if err := json.Unmarshal([]byte(doc), r); err != nil {
		return nil, fmt.Errorf("decoding run: %w", err)
	}
	if r.Timestamps == nil {
		r.Timestamps = Stamps{}
	}
	// A run stored before the column existed keeps its variables in
	// the doc until SealVariables moves them.
	if vars.Valid {
		plain, err := keys.OpenString(VariablesColumn.Purpose, vars.String)
		if err != nil {
			return nil, fmt.Errorf("run %s: %w", r.ID, err)
		}
		r.Variables = nil
		if err := json.Unmarshal([]byte(plain), &r.Variables); err != nil {
			return nil, fmt.Errorf("decoding the variables of run %s: %w", r.ID, err)
		}
	}
	return r, nil
}

// getRun reads a run by a column (id, plan_id or apply_id), optionally
// locking it for update inside a transaction.
func getRun(ctx context.Context, q store.Q, keys *seal.Keyring, col, id string, lock bool) (*Run, error) {
	query := `SELECT ` + runCols + ` FROM runs WHERE ` + col + ` = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	r, err := scanRunWith(keys)(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("run %s not found", id)
	}
	return r, err
}

func listRuns(ctx context.Context, q store.Q, keys *seal.Keyring, where string, args ...any) ([]*Run, error) {
	return store.All(ctx, q, scanRunWith(keys), `SELECT `+runCols+` FROM runs WHERE `+where, args...)
}

// SealVariables moves the variables of runs stored before they had their
// own sealed column out of the doc into it, once (recorded in
// seal_migrations), in one transaction.
func SealVariables(ctx context.Context, db *store.DB, keys *seal.Keyring) (int, error) {
	const name = "runs.variables out of doc"
	n := 0
	err := db.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		if done, err := seal.Done(ctx, tx, name); err != nil || done {
			return err
		}
		runs, err := listRuns(ctx, tx, keys, `variables IS NULL AND doc LIKE ?`+store.ForUpdate(tx), `%"variables":%`)
		if err != nil {
			return err
		}
		for _, r := range runs {
			if len(r.Variables) == 0 {
				continue
			}
			doc, vars, err := encodeRun(keys, r)
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE runs SET doc = ?, variables = ? WHERE id = ?`, doc, vars, r.ID); err != nil {
				return err
			}
			n++
		}
		return seal.MarkDone(ctx, tx, name)
	})
	if err != nil {
		return n, fmt.Errorf("sealing run variables: %w", err)
	}
	return n, nil
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
