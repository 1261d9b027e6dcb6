package workspace

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"sync"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The relationships a workspace document shows of other domains (its
// current run and run count, current configuration version, current
// state version, newest health assessment, no-code module) each cost a
// store round trip when asked one by one. A domain that can say its share
// in SQL implements one of the interfaces below: a scalar subquery over
// the workspace's id, written ws.id (at most one row). A workspace read
// then asks for every share in one statement (readDocument).

// CurrentRunsSQL is implemented by a CurrentRuns that says CurrentRunID
// and RunsCount (RunHistory) in SQL.
type CurrentRunsSQL interface {
	CurrentRunIDSQL() string
	RunsCountSQL() string
}

// CurrentConfigsSQL is implemented by a CurrentConfigs that says
// CurrentConfigurationVersionID in SQL.
type CurrentConfigsSQL interface {
	CurrentConfigurationVersionIDSQL() string
}

// StateSQL is implemented by a StateInfo that says CurrentStateVersionID
// in SQL ("" or NULL: no state, so nothing else of state is shown).
type StateSQL interface {
	CurrentStateVersionIDSQL() string
}

// StateSummarySQL is implemented by a StateSQL that also says the rest of
// StateSummary in SQL for a read that includes no outputs: scalar
// subqueries over ws.id (StateSummaryColumns), which StateSummaryOf turns
// into the summary of workspace workspaceID's current version id, its
// outputs named by ID only (the document's relationships name nothing
// more) and only those the caller in ctx may see, as StateSummarizer's.
// An error other than the caller's sends the read to the domain.
type StateSummarySQL interface {
	StateSummaryColumns() []string
	StateSummaryOf(ctx context.Context, workspaceID, id string, vals []sql.NullString) (StateSummary, error)
}

// NoCodeSQL is implemented by an API's NoCode that says in SQL whether a
// workspace was provisioned from a no-code module (NULL when not; then
// WorkspaceNoCode is not asked).
type NoCodeSQL interface {
	NoCodeWorkspaceSQL() string
}

// VarsSQL is implemented by an API's Vars that says WorkspaceVariableIDs
// in SQL: the IDs comma-separated in one value (NULL for none).
type VarsSQL interface {
	WorkspaceVariableIDsSQL() string
}

// ProjectDefaults is what a workspace read shows of its project: the
// project's effective execution mode and agent pool (already resolved
// against its organization's) and its auto-destroy activity duration.
type ProjectDefaults struct {
	ExecutionMode, AgentPoolID, AutoDestroyActivityDuration string
}

// ProjectSQL is implemented by a Projects that says ProjectDefaults in
// SQL: WorkspaceProjectSQL returns scalar subqueries over ws.project_id
// (ok false when it cannot), and WorkspaceProjectOf turns their values
// into the answer (an error where WorkspaceProject would fail).
type ProjectSQL interface {
	WorkspaceProjectSQL() (cols []string, ok bool)
	WorkspaceProjectOf(vals []sql.NullString) (ProjectDefaults, error)
}

// document is what readDocument read; a part whose domain cannot say it
// in SQL is asked of the domain (its has* is false).
type document struct {
	hasRun, hasRunsCount, hasConfig, hasState, hasStateSummary, hasAssessment, hasNoCode, hasVars, hasProject bool

	currentRun, config, state, assessment, vars sql.NullString
	runsCount, noCode                           sql.NullInt64
	project, stateSummary                       []sql.NullString
}

// varIDs are the variable IDs the document read.
func (d document) varIDs() []string {
	if d.vars.String == "" {
		return nil
	}
	return strings.Split(d.vars.String, ",")
}

// documentColumns returns the scalar subqueries of the parts of a
// workspace's document that their domains say in SQL (over ws, the
// workspace's row), and where each goes in d; none when no domain can.
// selectList writes them as columns.
func (a *API) documentColumns(d *document) (cols []string, dest []any) {
	add := func(expr string, has *bool, to any) {
		if expr == "" {
			return
		}
		*has = true
		cols = append(cols, expr)
		dest = append(dest, to)
	}
	if rs, isSQL := a.Service.Runs.(CurrentRunsSQL); isSQL && a.Service.Runs != nil {
		add(rs.CurrentRunIDSQL(), &d.hasRun, &d.currentRun)
		if _, hist := a.Service.Runs.(RunHistory); hist {
			add(rs.RunsCountSQL(), &d.hasRunsCount, &d.runsCount)
		}
	}
	if cs, isSQL := a.Service.Configs.(CurrentConfigsSQL); isSQL && a.Service.Configs != nil {
		add(cs.CurrentConfigurationVersionIDSQL(), &d.hasConfig, &d.config)
	}
	if ss, isSQL := a.Service.State.(StateSQL); isSQL && a.Service.State != nil {
		add(ss.CurrentStateVersionIDSQL(), &d.hasState, &d.state)
		if sum, isSum := a.Service.State.(StateSummarySQL); isSum {
			scols := sum.StateSummaryColumns()
			d.stateSummary = make([]sql.NullString, len(scols))
			for i, c := range scols {
				add(c, &d.hasStateSummary, &d.stateSummary[i])
			}
		}
	}
	if a.CurrentAssessment != nil {
		add(a.CurrentAssessmentSQL, &d.hasAssessment, &d.assessment)
	}
	if ns, isSQL := a.NoCode.(NoCodeSQL); isSQL && a.NoCode != nil {
		add(ns.NoCodeWorkspaceSQL(), &d.hasNoCode, &d.noCode)
	}
	if vs, isSQL := a.Vars.(VarsSQL); isSQL && a.Vars != nil {
		add(vs.WorkspaceVariableIDsSQL(), &d.hasVars, &d.vars)
	}
	if ps, isSQL := a.Service.projects.(ProjectSQL); isSQL && a.Service.projects != nil {
		if pcols, ok := ps.WorkspaceProjectSQL(); ok {
			d.project = make([]sql.NullString, len(pcols))
			for i, c := range pcols {
				add(c, &d.hasProject, &d.project[i])
			}
		}
	}
	return cols, dest
}

// documentKey is where a read-only request's memo keeps the document read
// with its workspace's row (Service.read).
func documentKey(id string) string { return "workspace-document:" + id }

// readDocument reads, in one statement, the parts of workspace id's
// document that their domains say in SQL; ok is false when none can or
// the statement failed (then every part is asked of its domain). A
// read-only request that looked the workspace up by name has read them
// with its row already (the request memo).
func (a *API) readDocument(ctx context.Context, id string) (d document, ok bool) {
	if d, ok := core.Recall[document](ctx, documentKey(id)); ok {
		return d, true
	}
	cols, dest := a.documentColumns(&d)
	if len(cols) == 0 {
		return document{}, false
	}
	if err := a.Service.db.QueryRow(ctx, `SELECT `+selectList(cols)+` FROM workspaces ws WHERE ws.id = ?`, id).Scan(dest...); err != nil {
		return document{}, false
	}
	return d, true
}

// readDocuments reads the documents of a page of workspaces in one
// statement and remembers them in a read-only request's memo, where
// readDocument finds them: a list renders its page with one statement,
// not one per workspace.
func (a *API) readDocuments(ctx context.Context, wss []*Workspace) {
	if len(wss) < 2 || !core.HasMemo(ctx) {
		return
	}
	var probe document
	cols, _ := a.documentColumns(&probe)
	if len(cols) == 0 {
		return
	}
	ids := make([]string, len(wss))
	for i, w := range wss {
		ids[i] = w.ID
	}
	in, args := store.In(ids)
	rows, err := a.Service.db.Query(ctx, `SELECT ws.id, `+selectList(cols)+` FROM workspaces ws WHERE ws.id IN (`+in+`)`, args...)
	if err != nil {
		return // each workspace reads its own
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var d document
		_, dest := a.documentColumns(&d)
		if err := rows.Scan(append([]any{&id}, dest...)...); err != nil {
			return
		}
		core.Remember(ctx, documentKey(id), d)
	}
}

// selectList writes scalar subqueries as the columns of a select list.
func selectList(exprs []string) string {
	var b strings.Builder
	for i, e := range exprs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(")
		b.WriteString(e)
		b.WriteString(")")
	}
	return b.String()
}

// documentQuery is the statement readByName last built, and the document
// parts it was built of: the parts are the same strings on every read
// (their domains' SQL), so the statement is built again only when they
// differ.
type documentQuery struct {
	mu    sync.Mutex
	parts []string
	query string
}

// get returns the statement for parts, built by build when parts differ
// from the last.
func (q *documentQuery) get(parts []string, build func() string) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !slices.Equal(q.parts, parts) {
		q.parts, q.query = slices.Clone(parts), build()
	}
	return q.query
}
