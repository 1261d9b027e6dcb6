package workspace

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The site administrator's view of workspaces (Terraform Enterprise's
// admin/workspaces API): every workspace of every organization, and the
// deletion of any of them.

// Summary is what the admin API shows of a workspace.
type Summary struct {
	ID, Organization, Name string
	Locked                 bool
	// CurrentRunID is the workspace's current run ("" when it has none).
	CurrentRunID string
	// VCSIdentifier is the repository the workspace is connected to (""
	// when none).
	VCSIdentifier string
}

// AdminListOptions filter and order the list of every workspace.
type AdminListOptions struct {
	// Search matches a part of the workspace's name or of its
	// organization's name, whatever the case.
	Search string
	// CurrentRunStatus keeps the workspaces whose current run has one of
	// these statuses (a status no run has matches nothing).
	CurrentRunStatus []string
	// Sort is name (the default) or current-run.created-at, a "-" prefix
	// reversing.
	Sort string
}

// adminSorts are the orders AdminListOptions.Sort may name.
var adminSorts = []string{"name", "-name", "current-run.created-at", "-current-run.created-at"}

// summaryCols are the columns of a Summary over a workspaces row aliased
// ws; the current run is the run domain's SQL when it has one.
func (s *Service) summaryCols() string {
	current := `NULL`
	if rs, ok := s.Runs.(CurrentRunsSQL); ok {
		current = `(` + rs.CurrentRunIDSQL() + `)`
	}
	return `ws.id, ws.organization_name, ws.name, ws.locked_by_kind, ` + current + `, ws.attrs`
}

func scanSummary(sc store.Scanner) (*Summary, error) {
	var w Summary
	var lockKind, attrs string
	var current sql.NullString
	if err := sc.Scan(&w.ID, &w.Organization, &w.Name, &lockKind, &current, &attrs); err != nil {
		return nil, err
	}
	w.Locked, w.CurrentRunID = lockKind != "", current.String
	// Of the settings, the repository's identifier only.
	var settings struct {
		VCSRepo *struct {
			Identifier string `json:"identifier"`
		} `json:"vcs-repo"`
	}
	if err := json.Unmarshal([]byte(attrs), &settings); err != nil {
		return nil, fmt.Errorf("decoding the settings of workspace %s: %w", w.ID, err)
	}
	if settings.VCSRepo != nil {
		w.VCSIdentifier = settings.VCSRepo.Identifier
	}
	return &w, nil
}

// fillCurrentRuns asks the run domain for the current runs that the
// summaries' statement could not say (a run domain without SQL).
func (s *Service) fillCurrentRuns(ctx context.Context, ws []*Summary) error {
	if _, ok := s.Runs.(CurrentRunsSQL); ok || s.Runs == nil {
		return nil
	}
	for _, w := range ws {
		id, err := s.Runs.CurrentRunID(ctx, w.ID)
		if err != nil {
			return err
		}
		w.CurrentRunID = id
	}
	return nil
}

// AdminListPage returns at most limit (all when negative) of every
// organization's workspaces that match opts, from offset on, and how many
// match in all: a site administrator's list, filtered, ordered and paged
// in the store. An unknown sort is refused.
func (s *Service) AdminListPage(ctx context.Context, opts AdminListOptions, offset, limit int) ([]*Summary, int, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, 0, err
	}
	var conds []string
	var args []any
	if q := strings.ToLower(strings.TrimSpace(opts.Search)); q != "" {
		pattern := "%" + store.EscapeLike(q) + "%"
		conds = append(conds, `(LOWER(ws.name) LIKE ?`+store.LikeEscape+` OR LOWER(ws.organization_name) LIKE ?`+store.LikeEscape+`)`)
		args = append(args, pattern, pattern)
	}
	var statuses []string
	for _, st := range opts.CurrentRunStatus {
		if st = strings.TrimSpace(st); st != "" {
			statuses = append(statuses, st)
		}
	}
	if len(statuses) > 0 {
		h, ok := s.Runs.(RunHistorySQL)
		if !ok {
			return nil, 0, core.BadRequest("filter[current_run][status] is not available")
		}
		in, sargs := store.In(statuses)
		conds = append(conds, `(`+h.CurrentRunStatusSQL()+`) IN (`+in+`)`)
		args = append(args, sargs...)
	}
	order, err := s.adminOrder(opts.Sort)
	if err != nil {
		return nil, 0, err
	}
	var out []*Summary
	var total int
	if len(conds) == 0 {
		// Every workspace: the total is the sum of the counts the store
		// keeps per organization (migration 1043), not a count of the
		// site's workspaces for every page.
		if err := s.db.QueryRow(ctx, `SELECT COALESCE(SUM(workspaces), 0) FROM workspace_counts`).Scan(&total); err != nil {
			return nil, 0, err
		}
		out, total, err = store.PageOf(ctx, s.db, scanSummary, s.summaryCols(), "workspaces ws", "1 = 1", order, max(offset, 0), limit, total)
	} else {
		out, total, err = store.Page(ctx, s.db, scanSummary, s.summaryCols(), "workspaces ws", strings.Join(conds, " AND "), order, max(offset, 0), limit, args...)
	}
	if err != nil {
		return nil, 0, err
	}
	return out, total, s.fillCurrentRuns(ctx, out)
}

// adminOrder is the ORDER BY of the list of every workspace: by name (the
// default; a name repeats across organizations, whose names then order
// them, as the index workspaces_admin_list holds them) or by the current
// run's creation, as an organization's list sorts it.
func (s *Service) adminOrder(by string) (string, error) {
	switch by {
	case "", "name":
		return `ws.name, ws.organization_name`, nil
	case "-name":
		return `ws.name DESC, ws.organization_name DESC`, nil
	case "current-run.created-at", "-current-run.created-at":
		return s.listOrder(by), nil
	}
	return "", core.BadRequest("sort must be one of %s, not %q", strings.Join(adminSorts, ", "), by)
}

// AdminSummaries returns the workspaces of ids that exist, in no order
// (those of a page of the admin run list): one statement.
func (s *Service) AdminSummaries(ctx context.Context, ids []string) ([]*Summary, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if len(ids) == 0 {
		return nil, nil
	}
	in, args := store.In(ids)
	out, err := store.All(ctx, s.db, scanSummary, `SELECT `+s.summaryCols()+` FROM workspaces ws WHERE ws.id IN (`+in+`)`, args...)
	if err != nil {
		return nil, err
	}
	return out, s.fillCurrentRuns(ctx, out)
}

// AdminGet returns any workspace's summary, for a site administrator.
func (s *Service) AdminGet(ctx context.Context, id string) (*Summary, error) {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return nil, err
	}
	if !core.HasPrefix(id, core.PrefixWorkspace) {
		return nil, core.NotFound("workspace %q not found", id)
	}
	ws, err := s.AdminSummaries(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	if len(ws) == 0 {
		return nil, core.NotFound("workspace %q not found", id)
	}
	return ws[0], nil
}

// AdminDelete deletes any workspace for a site administrator: the
// deletion of Delete, with everything other domains keep for it.
func (s *Service) AdminDelete(ctx context.Context, id string) error {
	if err := authz.RequireSiteAdmin(ctx); err != nil {
		return err
	}
	return s.Delete(ctx, id)
}
