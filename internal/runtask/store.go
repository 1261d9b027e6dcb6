package runtask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// HMACKeyColumn is this domain's column sealed at rest (docs/design/storage.md):
// a task's HMAC key is stored sealed and opened when the task is read.
var HMACKeyColumn = seal.Column{Table: "run_tasks", IDColumn: "id", Column: "hmac_key", Purpose: "run_tasks.hmac_key"}

// taskScanner reads tasks and opens their sealed HMAC keys with k.
func taskScanner(k *seal.Keyring) func(store.Scanner) (*Task, error) {
	return func(sc store.Scanner) (*Task, error) {
		t, err := scanTask(sc)
		if err != nil {
			return nil, err
		}
		if t.hmacKey, err = k.OpenString(HMACKeyColumn.Purpose, t.hmacKey); err != nil {
			return nil, fmt.Errorf("run task %s: %w", t.ID, err)
		}
		return t, nil
	}
}

const taskCols = `id, organization_name, name, url, description, category, hmac_key, enabled, global_enabled, global_stages, global_enforcement, created_at, updated_at, agent_pool_id`

func scanTask(sc store.Scanner) (*Task, error) {
	var t Task
	var stages string
	var created, updated int64
	if err := sc.Scan(&t.ID, &t.Organization, &t.Name, &t.URL, &t.Description, &t.Category, &t.hmacKey, &t.Enabled,
		&t.Global.Enabled, &stages, &t.Global.EnforcementLevel, &created, &updated, &t.AgentPoolID); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stages), &t.Global.Stages); err != nil {
		return nil, fmt.Errorf("decoding run task %s: %w", t.ID, err)
	}
	t.CreatedAt, t.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &t, nil
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func stagesOrEmpty(s []Stage) []Stage {
	if s == nil {
		return []Stage{}
	}
	return s
}

func insertTask(ctx context.Context, q store.Q, k *seal.Keyring, t *Task) error {
	key, err := k.SealString(HMACKeyColumn.Purpose, t.hmacKey)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO run_tasks (`+taskCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.ID, t.Organization, t.Name, t.URL, t.Description, t.Category, key, t.Enabled,
		t.Global.Enabled, jsonText(stagesOrEmpty(t.Global.Stages)), string(t.Global.EnforcementLevel), core.Micros(t.CreatedAt), core.Micros(t.UpdatedAt),
		t.AgentPoolID)
	if store.IsUniqueViolation(q, err) {
		return core.Invalid("name %q is already taken by another run task in organization %s", t.Name, t.Organization)
	}
	return redact(err, t.hmacKey)
}

func updateTask(ctx context.Context, q store.Q, k *seal.Keyring, t *Task) error {
	key, err := k.SealString(HMACKeyColumn.Purpose, t.hmacKey)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `UPDATE run_tasks SET name = ?, url = ?, description = ?, category = ?, hmac_key = ?, enabled = ?, global_enabled = ?, global_stages = ?, global_enforcement = ?, updated_at = ?, agent_pool_id = ? WHERE id = ?`,
		t.Name, t.URL, t.Description, t.Category, key, t.Enabled, t.Global.Enabled, jsonText(stagesOrEmpty(t.Global.Stages)),
		string(t.Global.EnforcementLevel), core.Micros(t.UpdatedAt), t.AgentPoolID, t.ID)
	if store.IsUniqueViolation(q, err) {
		return core.Invalid("name %q is already taken by another run task in organization %s", t.Name, t.Organization)
	}
	return redact(err, t.hmacKey)
}

func loadTask(ctx context.Context, q store.Q, k *seal.Keyring, id string) (*Task, error) {
	if !core.HasPrefix(id, PrefixTask) {
		return nil, core.NotFound("run task %q not found", id)
	}
	t, err := taskScanner(k)(q.QueryRow(ctx, `SELECT `+taskCols+` FROM run_tasks WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("run task %q not found", id)
	}
	return t, err
}

const wsTaskCols = `id, task_id, workspace_id, enforcement_level, stages, created_at`

func scanWorkspaceTask(sc store.Scanner) (*WorkspaceTask, error) {
	var w WorkspaceTask
	var stages string
	var created int64
	if err := sc.Scan(&w.ID, &w.TaskID, &w.WorkspaceID, &w.EnforcementLevel, &stages, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(stages), &w.Stages); err != nil {
		return nil, fmt.Errorf("decoding workspace run task %s: %w", w.ID, err)
	}
	w.CreatedAt = core.FromMicros(created)
	return &w, nil
}

func loadWorkspaceTask(ctx context.Context, q store.Q, workspaceID, id string) (*WorkspaceTask, error) {
	if !core.HasPrefix(id, PrefixWorkspaceTask) {
		return nil, core.NotFound("workspace run task %q not found", id)
	}
	w, err := scanWorkspaceTask(q.QueryRow(ctx, `SELECT `+wsTaskCols+` FROM workspace_run_tasks WHERE id = ? AND workspace_id = ?`, id, workspaceID))
	if store.IsNoRows(err) {
		return nil, core.NotFound("workspace run task %q not found", id)
	}
	return w, err
}

// redact keeps a driver error from carrying an HMAC key into a log.
func redact(err error, key string) error {
	if err == nil || key == "" {
		return err
	}
	var ce *core.Error
	if errors.As(err, &ce) {
		return err
	}
	return errors.New("database error (details withheld: the statement carried an HMAC key)")
}

// UsingPool counts the run tasks whose requests agent pool poolID
// forwards.
func UsingPool(ctx context.Context, q store.Q, poolID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM run_tasks WHERE agent_pool_id = ?`, poolID).Scan(&n)
	return n, err
}
