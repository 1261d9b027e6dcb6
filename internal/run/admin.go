package run

import (
	"context"
	"strings"
	"time"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The site administrator's view of runs (Terraform Enterprise's
// admin/runs API): every run of every organization, and the force-cancel
// of a stuck one.

// AdminListOptions filter the list of every run.
type AdminListOptions struct {
	// Search matches a part of the run's ID, of its workspace's name or
	// of its organization's name, whatever the case.
	Search string
	// Statuses keeps the runs in one of these statuses (a status no run
	// has matches nothing).
	Statuses []string
	// From and To keep the runs created at or after From and at or
	// before To (zero: no bound).
	From, To time.Time
	// Offset and Limit select a page of the list (Limit 0: all of it).
	Offset, Limit int
}

// WorkspaceNameSQL is implemented by a Workspaces that says in SQL which
// runs' workspaces have a name matching a LIKE pattern: a condition over
// runs.workspace_id taking one argument, the pattern (lowercase, its
// literal parts escaped with store.EscapeLike). Without it an admin's
// search does not look at workspace names.
type WorkspaceNameSQL interface {
	WorkspaceNameLikeSQL() string
}

// AdminListPage returns a page of every organization's runs (health
// assessments left out), newest first, that match o, and how many match in
// all: a site administrator's list, filtered, ordered and paged in the
// store (the index runs_admin_list holds the runs in list order).
func (s *Service) AdminListPage(ctx context.Context, o AdminListOptions) ([]*Run, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	where, args := `assessment = ?`, []any{false}
	filtered := false
	and := func(cond string, a ...any) {
		where, args, filtered = where+` AND `+cond, append(args, a...), true
	}
	if q := strings.ToLower(strings.TrimSpace(o.Search)); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		cond := `LOWER(id) LIKE ?` + store.LikeEscape + ` OR LOWER(organization_name) LIKE ?` + store.LikeEscape
		a := []any{pattern, pattern}
		if ws, ok := s.Workspaces.(WorkspaceNameSQL); ok {
			cond += ` OR ` + ws.WorkspaceNameLikeSQL()
			a = append(a, pattern)
		}
		and(`(`+cond+`)`, a...)
	}
	if !o.From.IsZero() {
		and(`created_at >= ?`, core.Micros(o.From))
	}
	if !o.To.IsZero() {
		and(`created_at <= ?`, core.Micros(o.To))
	}
	var statuses []string
	for _, st := range o.Statuses {
		if st = strings.TrimSpace(st); st != "" {
			statuses = append(statuses, st)
		}
	}
	var total func(store.Q) (int, error)
	if !filtered && len(statuses) == 0 {
		// Every run: the total is the sum of the run counts kept per
		// workspace (insertRun), not a count of the site's history for
		// every page.
		total = func(q store.Q) (int, error) {
			var n int
			err := q.QueryRow(ctx, `SELECT COALESCE(SUM(runs), 0) FROM run_counts`).Scan(&n)
			return n, err
		}
	}
	return s.page(ctx, where, args, ListOptions{Statuses: statuses, Offset: o.Offset, Limit: o.Limit}, total, nil)
}

// AdminForceCancel ends any run that has not ended, at once, for a site
// administrator: ForceCancel's transition (the runner kills terraform, the
// workspace is released, the next run starts) without the cancel and
// grace period a user's force-cancel needs first, since the run it is for
// is stuck. It returns the run as it ends.
func (s *Service) AdminForceCancel(ctx context.Context, id, comment string) (*Run, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if err := s.forceCancel(ctx, id, comment, false); err != nil {
		return nil, err
	}
	return s.get(ctx, id)
}
