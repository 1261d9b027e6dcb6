package run

import (
	"context"
	"strings"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ListOptions filter run lists.
type ListOptions struct {
	Statuses   []string
	Operations []string // plan_only | plan_and_apply | destroy | refresh_only | save_plan
	Sources    []string
	// Searches: CreatedBy matches the creator's ID (the API resolves
	// search[user]); Commit matches nothing, as no run comes from VCS;
	// Basic matches the run ID, message or creator.
	CreatedBy, Commit, Basic string
	NoSuchUser               bool // search[user] named no user: nothing matches
	// Organization lists only: workspace names and agent pool names.
	WorkspaceNames, AgentPools []string
	// StatusGroup is "non_final", "final" or "discardable".
	StatusGroup string
	// Offset and Limit select a page of the list (Limit 0: all of it).
	Offset, Limit int
}

// statusGroups are the statuses of each status group, read from the
// state machine (status.go), as SQL lists.
var statusGroups = map[string]string{
	"final":       sqlStatuses(statusesWhere(Status.Final)...),
	"non_final":   sqlStatuses(statusesWhere(func(s Status) bool { return !s.Final() })...),
	"discardable": sqlStatuses(statusesWhere(Status.Discardable)...),
}

// sql renders the filters that the runs table's columns answer as SQL
// conditions (each starting with " AND"); inGo reports whether others
// remain, which match checks on the decoded runs.
func (o ListOptions) sql() (where string, args []any, inGo bool) {
	var b strings.Builder
	if len(o.Statuses) > 0 {
		b.WriteString(" AND status IN (")
		for i, s := range o.Statuses {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('?')
			args = append(args, strings.TrimSpace(s))
		}
		b.WriteByte(')')
	}
	if g, ok := statusGroups[o.StatusGroup]; ok {
		b.WriteString(" AND status IN " + g)
	}
	if o.NoSuchUser || o.Commit != "" {
		b.WriteString(" AND 1 = 0")
	}
	inGo = len(o.Operations) > 0 || len(o.Sources) > 0 || o.CreatedBy != "" || o.Basic != "" ||
		len(o.WorkspaceNames) > 0 || len(o.AgentPools) > 0
	return b.String(), args, inGo
}

func (o ListOptions) match(r *Run) bool {
	if len(o.Statuses) > 0 && !contains(o.Statuses, string(r.Status)) {
		return false
	}
	if len(o.Sources) > 0 && !contains(o.Sources, r.Source) {
		return false
	}
	if o.NoSuchUser || o.Commit != "" || (o.CreatedBy != "" && r.CreatedBy != o.CreatedBy) {
		return false
	}
	if o.Basic != "" && !strings.Contains(r.ID, o.Basic) && !strings.Contains(strings.ToLower(r.Message), strings.ToLower(o.Basic)) && r.CreatedBy != o.Basic {
		return false
	}
	switch o.StatusGroup {
	case "non_final":
		if r.Status.Final() {
			return false
		}
	case "final":
		if !r.Status.Final() {
			return false
		}
	case "discardable":
		if !r.Status.Discardable() {
			return false
		}
	}
	if len(o.Operations) > 0 {
		op := "plan_and_apply"
		switch {
		case r.PlanOnly:
			op = "plan_only"
		case r.IsDestroy:
			op = "destroy"
		case r.RefreshOnly:
			op = "refresh_only"
		case r.SavePlan:
			op = "save_plan"
		}
		if !contains(o.Operations, op) {
			return false
		}
	}
	return true
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == v {
			return true
		}
	}
	return false
}

// List returns a workspace's runs, newest first.
func (s *Service) List(ctx context.Context, workspaceID string, o ListOptions) ([]*Run, error) {
	o.Offset, o.Limit = 0, 0
	runs, _, err := s.ListPage(ctx, workspaceID, o)
	return runs, err
}

// ListPage returns a page of a workspace's runs, newest first, and how
// many runs the whole list has. The store filters, orders and pages;
// filters that only the run's document answers (operation, source,
// searches) are checked on the runs the store returns.
func (s *Service) ListPage(ctx context.Context, workspaceID string, o ListOptions) ([]*Run, int, error) {
	// Whether the caller may see the workspace: its identity is enough
	// (Get also works out the effective execution mode, three statements
	// for a workspace that inherits its project's).
	if _, err := s.Workspaces.Readable(ctx, workspaceID); err != nil {
		return nil, 0, err
	}
	return s.workspacePage(ctx, workspaceID, o)
}

func (s *Service) workspacePage(ctx context.Context, workspaceID string, o ListOptions) ([]*Run, int, error) {
	return s.page(ctx, `workspace_id = ? AND assessment = ?`, []any{workspaceID, false}, o, func(q store.Q) (int, error) {
		// An unfiltered list's total is the workspace's run count.
		return runsCount(ctx, q, workspaceID)
	}, nil)
}

// ListOrganization returns an organization's runs, newest first.
func (s *Service) ListOrganization(ctx context.Context, org string, o ListOptions) ([]*Run, error) {
	o.Offset, o.Limit = 0, 0
	runs, _, err := s.ListOrganizationPage(ctx, org, o)
	return runs, err
}

// ListOrganizationPage is ListPage for an organization's runs: those of
// the workspaces the caller may read, selected in the store so that the
// page and its total count only those.
func (s *Service) ListOrganizationPage(ctx context.Context, org string, o ListOptions) ([]*Run, int, error) {
	if err := auth.CheckOrganization(ctx, org); err != nil {
		return nil, 0, err
	}
	where, args, each, err := s.readableIn(ctx, org)
	if err != nil {
		return nil, 0, err
	}
	var keep func(*Run) (bool, error)
	if len(o.WorkspaceNames) > 0 || len(o.AgentPools) > 0 || each != nil {
		workspaces := map[string]*Workspace{}
		keep = func(r *Run) (bool, error) {
			if each != nil && !each(r.WorkspaceID) {
				return false, nil
			}
			if len(o.WorkspaceNames) == 0 && len(o.AgentPools) == 0 {
				return true, nil
			}
			w, ok := workspaces[r.WorkspaceID]
			if !ok {
				var err error
				if w, err = s.Workspaces.Get(ctx, r.WorkspaceID); err != nil && core.KindOf(err) != core.KindNotFound {
					return false, err
				}
				workspaces[r.WorkspaceID] = w
			}
			return w != nil && (len(o.WorkspaceNames) == 0 || contains(o.WorkspaceNames, w.Name)) &&
				(len(o.AgentPools) == 0 || contains(o.AgentPools, w.AgentPool)), nil
		}
	}
	return s.page(ctx, where, args, o, nil, keep)
}

// page lists the runs matching where and the options, newest first. When
// every filter is SQL (keep is nil), the store pages (LIMIT/OFFSET on an
// index in list order) and counts (unfiltered, from total when given);
// otherwise the rows matching the SQL part are decoded and the rest is
// checked here.
func (s *Service) page(ctx context.Context, where string, args []any, o ListOptions, total func(store.Q) (int, error), keep func(*Run) (bool, error)) ([]*Run, int, error) {
	cond, more, inGo := o.sql()
	where, args = where+cond, append(args, more...)
	const order = ` ORDER BY created_at DESC, id DESC`
	if inGo || keep != nil || o.Limit <= 0 {
		all, err := listRuns(ctx, s.DB, s.Keys, where+order, args...)
		if err != nil {
			return nil, 0, err
		}
		out := all[:0]
		for _, r := range all {
			if !o.match(r) {
				continue
			}
			if keep != nil {
				ok, err := keep(r)
				if err != nil {
					return nil, 0, err
				}
				if !ok {
					continue
				}
			}
			out = append(out, r)
		}
		n := len(out)
		if o.Limit > 0 {
			out = out[min(o.Offset, n):min(o.Offset+o.Limit, n)]
		}
		return out, n, nil
	}
	var n int
	var err error
	if total != nil && cond == "" {
		n, err = total(s.DB)
	} else {
		err = s.DB.QueryRow(ctx, `SELECT COUNT(*) FROM runs WHERE `+where, args...).Scan(&n)
	}
	if err != nil {
		return nil, 0, err
	}
	if o.Offset >= n {
		return nil, n, nil
	}
	runs, err := listRuns(ctx, s.DB, s.Keys, where+order+` LIMIT ? OFFSET ?`, append(args, o.Limit, o.Offset)...)
	return runs, n, err
}

// queueWhere picks the runs that count in a workspace's queue: the
// predicate of the partial index runs_queue (migration 1001), written the
// same way so that both stores answer the count from that index, which
// holds only the queue and not the history.
var queueWhere = "NOT plan_only AND status NOT IN " + notAhead

// queuePositionsQuery counts, for each of n runs named by ID, the runs of
// its workspace's queue created before it.
func queuePositionsQuery(n int) string {
	return `SELECT r.id, (SELECT COUNT(*) FROM runs o WHERE o.workspace_id = r.workspace_id AND ` + queueWhere + `
		AND o.created_at < r.created_at) FROM runs r WHERE r.id IN (?` + strings.Repeat(",?", n-1) + `)`
}

// QueuePositions returns, in one query, how many runs of its workspace go
// before each pending, non-speculative run of runs (see PositionInQueue);
// runs not in the map are at position 0.
func (s *Service) QueuePositions(ctx context.Context, runs []*Run) (map[string]int, error) {
	var ids []string
	for _, r := range runs {
		if r.Status == Pending && !r.PlanOnly {
			ids = append(ids, r.ID)
		}
	}
	out := map[string]int{}
	if len(ids) == 0 {
		return out, nil
	}
	args := make([]any, 0, len(ids))
	for _, id := range ids {
		args = append(args, id)
	}
	rows, err := s.DB.Query(ctx, queuePositionsQuery(len(ids)), args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}
