package run

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Comment is a remark on a run: made with POST /runs/{id}/comments or
// given with an apply, discard or cancel. Every comment is also a
// "commented" event in the run's history.
type Comment struct {
	ID        string
	RunID     string
	Body      string
	Actor     string
	CreatedAt int64
}

// PrefixComment starts comment IDs (HCP Terraform's are "wsc-…").
const PrefixComment = "wsc"

// prefixEvent starts run event IDs.
const prefixEvent = "re"

func addComment(ctx context.Context, q store.Q, runID, body, actor string) (*Comment, error) {
	c := &Comment{ID: core.NewID(PrefixComment), RunID: runID, Body: body, Actor: actor, CreatedAt: core.Micros(core.Now())}
	if _, err := q.Exec(ctx, `INSERT INTO run_comments (id, run_id, body, actor, created_at) VALUES (?, ?, ?, ?, ?)`,
		c.ID, c.RunID, c.Body, c.Actor, c.CreatedAt); err != nil {
		return nil, err
	}
	_, err := q.Exec(ctx, `INSERT INTO run_events (id, run_id, action, description, actor, created_at, comment_id) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		core.NewID(prefixEvent), runID, "commented", "", actor, c.CreatedAt, c.ID)
	return c, err
}

// commentIfAny records the comment given with an action, when there is one.
func commentIfAny(ctx context.Context, q store.Q, runID, body string) error {
	if strings.TrimSpace(body) == "" {
		return nil
	}
	_, err := addComment(ctx, q, runID, body, actorOf(ctx))
	return err
}

func scanComment(sc interface{ Scan(...any) error }) (*Comment, error) {
	var c Comment
	if err := sc.Scan(&c.ID, &c.RunID, &c.Body, &c.Actor, &c.CreatedAt); err != nil {
		return nil, err
	}
	return &c, nil
}

const commentCols = `id, run_id, body, actor, created_at`

func listComments(ctx context.Context, q store.Q, runID string) ([]*Comment, error) {
	return store.All(ctx, q, scanComment, `SELECT `+commentCols+` FROM run_comments WHERE run_id = ? ORDER BY created_at, id`, runID)
}

// CreateComment adds a comment to a run the caller can see.
func (s *Service) CreateComment(ctx context.Context, runID, body string) (*Comment, error) {
	if strings.TrimSpace(body) == "" {
		return nil, core.Invalid("body is required")
	}
	if p := auth.FromContext(ctx); p != nil && p.Kind == auth.KindRun {
		return nil, core.Forbidden("a run token cannot comment on runs")
	}
	if _, err := s.Get(ctx, runID); err != nil {
		return nil, err
	}
	var c *Comment
	err := s.DB.Tx(ctx, func(tx *store.Tx) error {
		var err error
		c, err = addComment(ctx, tx, runID, body, actorOf(ctx))
		return err
	})
	return c, err
}

// Comments lists a run's comments, oldest first.
func (s *Service) Comments(ctx context.Context, runID string) ([]*Comment, error) {
	if _, err := s.Get(ctx, runID); err != nil {
		return nil, err
	}
	return listComments(ctx, s.DB, runID)
}

// GetComment returns a comment on a run the caller can see.
func (s *Service) GetComment(ctx context.Context, id string) (*Comment, error) {
	if !core.HasPrefix(id, PrefixComment) {
		return nil, core.NotFound("comment %s not found", id)
	}
	c, err := scanComment(s.DB.QueryRow(ctx, `SELECT `+commentCols+` FROM run_comments WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("comment %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := s.readable(ctx, c.RunID); err != nil {
		return nil, core.NotFoundAs(err, "comment %s not found", id)
	}
	return c, nil
}

// GetEvent returns an event of a run the caller can see.
func (s *Service) GetEvent(ctx context.Context, id string) (*Event, error) {
	if !core.HasPrefix(id, prefixEvent) {
		return nil, core.NotFound("run event %s not found", id)
	}
	e, err := scanEvent(s.DB.QueryRow(ctx, `SELECT `+eventCols+` FROM run_events WHERE id = ?`, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("run event %s not found", id)
	}
	if err != nil {
		return nil, err
	}
	if err := s.readable(ctx, e.RunID); err != nil {
		return nil, core.NotFoundAs(err, "run event %s not found", id)
	}
	return e, nil
}

// readable decides reading a run's comment or event named by its own ID
// (routes the guard cannot place): what reading the run's comments or
// events needs, RunRead on the run.
func (s *Service) readable(ctx context.Context, runID string) error {
	r, err := s.Get(ctx, runID)
	if err != nil {
		return err
	}
	res := authz.Resource{Organization: r.Organization, WorkspaceID: r.WorkspaceID, RunID: r.ID}
	res.ProjectID, _ = r.WorkspaceProject()
	return authz.Allows(ctx, authz.RunRead, res)
}

// relations returns the IDs of a run's events and comments, for the run's
// run-events and comments relationships.
// A list has them remembered in the request memo by prefetchRelations.
func (s *Service) relations(ctx context.Context, runID string) (events, comments []string, err error) {
	rel, err := core.Memoize(ctx, relationsKey+runID, func() (runRelations, error) {
		evs, err := listEvents(ctx, s.DB, runID)
		var rel runRelations
		for _, e := range evs {
			rel.add(e)
		}
		return rel, err
	})
	return rel.events, rel.comments, err
}

const relationsKey = "run-relations:"

// runRelations are a run's event and comment IDs.
type runRelations struct{ events, comments []string }

func (rel *runRelations) add(e *Event) {
	rel.events = append(rel.events, e.ID)
	if e.CommentID != "" {
		rel.comments = append(rel.comments, e.CommentID)
	}
}

// prefetchRelations reads the events of a page of runs in one query and
// remembers each run's relations in the request memo, so that rendering
// the page does not ask once per run.
func (s *Service) prefetchRelations(ctx context.Context, runs []*Run) error {
	if len(runs) == 0 {
		return nil
	}
	args := make([]any, len(runs))
	for i, r := range runs {
		args[i] = r.ID
	}
	evs, err := store.All(ctx, s.DB, scanEvent, `SELECT `+eventCols+` FROM run_events WHERE run_id IN (?`+strings.Repeat(",?", len(runs)-1)+`) ORDER BY created_at, id`, args...)
	if err != nil {
		return err
	}
	byRun := make(map[string]*runRelations, len(runs))
	for _, r := range runs {
		byRun[r.ID] = &runRelations{}
	}
	for _, e := range evs {
		byRun[e.RunID].add(e)
	}
	for id, rel := range byRun {
		core.Remember(ctx, relationsKey+id, *rel)
	}
	return nil
}
