package run

import (
	"context"
	"database/sql"
	"strings"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// StageIDsSQL is implemented by a TaskStages that says a run's task stage
// IDs in SQL: RunStageIDsSQL is a scalar subquery over the run's id,
// written runs.id, giving them comma-separated in stage order (NULL for
// none); RememberStageIDs puts what it gave into the request memo, where
// the task stage domain looks first.
type StageIDsSQL interface {
	RunStageIDsSQL() string
	RememberStageIDs(ctx context.Context, runID string, ids []string)
}

// WorkspaceProjectSQL is implemented by a Workspaces that says a run's
// workspace's project ID in SQL: RunWorkspaceProjectSQL is a scalar
// subquery over the run's workspace ID, written runs.workspace_id. The run
// read takes it in its one statement (Run.WorkspaceProject), so that the
// authorization guard of a run request need not read the workspace.
type WorkspaceProjectSQL interface {
	RunWorkspaceProjectSQL() string
}

// readDocument reads run id together with what its document shows of
// other tables (its events and comments, its task stages) in one
// statement, and remembers those in the request memo: a run read, which
// clients poll all through a run, costs one query for the run instead of
// three. Without a memo there is nowhere to keep them: the run alone.
func (s *Service) readDocument(ctx context.Context, id string) (*Run, error) {
	if !core.HasMemo(ctx) {
		return s.get(ctx, id)
	}
	cols := `, (SELECT string_agg(e.id || '=' || COALESCE(e.comment_id, ''), ',' ORDER BY e.created_at, e.id) FROM run_events e WHERE e.run_id = runs.id)`
	var events, stages sql.NullString
	more := []any{&events}
	ss, withStages := s.Stages.(StageIDsSQL)
	if withStages {
		cols += `, (` + ss.RunStageIDsSQL() + `)`
		more = append(more, &stages)
	}
	var project sql.NullString
	wp, withProject := s.Workspaces.(WorkspaceProjectSQL)
	if withProject {
		cols += `, (` + wp.RunWorkspaceProjectSQL() + `)`
		more = append(more, &project)
	}
	r, err := scanRunWith(s.Keys)(moreColumns{s.DB.QueryRow(ctx, `SELECT `+runCols+cols+` FROM runs WHERE id = ?`, id), more})
	if store.IsNoRows(err) {
		return nil, core.NotFound("run %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	r.wsProject, r.wsProjectKnown = project.String, project.Valid
	var rel runRelations
	for _, ev := range split(events.String) {
		evID, commentID, _ := strings.Cut(ev, "=")
		rel.add(&Event{ID: evID, CommentID: commentID})
	}
	core.Remember(ctx, relationsKey+id, rel)
	if withStages {
		ss.RememberStageIDs(ctx, id, split(stages.String))
	}
	return r, nil
}

// split splits a comma-separated list ("" is none).
func split(s string) []string {
	if s == "" {
		return []string{}
	}
	return strings.Split(s, ",")
}

// moreColumns scans the columns after a run's into more.
type moreColumns struct {
	sc   store.Scanner
	more []any
}

func (m moreColumns) Scan(dest ...any) error { return m.sc.Scan(append(dest, m.more...)...) }
