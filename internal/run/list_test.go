package run

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/store"
)

// TestListsInSQL: run lists filtered, ordered and paged by the store give
// what filtering the whole history in Go gives (totals included), the
// workspace's run count matches its runs, and the queue positions of a
// page, computed in one query, are each run's own, on both stores.
func TestListsInSQL(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		cycle := []Status{Applied, Pending, Planned, Errored, Pending, PlannedAndSaved, Planning, Discarded, Pending}
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		var all []*Run // ws-a's runs, newest first
		add := func(ws string, i int, st Status, assessment bool) *Run {
			r := &Run{ID: fmt.Sprintf("run-%s-%03d", ws, i), WorkspaceID: ws, Organization: "acme", ConfigurationVersionID: "cv-x",
				Status: st, Timestamps: Stamps{}, PlanOnly: i%7 == 3, IsDestroy: i%5 == 1, Assessment: assessment,
				CreatedAt: base.Add(time.Duration(i/2) * time.Second), // pairs share a time: the ID breaks the tie
				Plan:      Phase{ID: fmt.Sprintf("plan-%s-%03d", ws, i)}, Apply: Phase{ID: fmt.Sprintf("apply-%s-%03d", ws, i)}}
			if err := insertRun(ctx, db, nil, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		for i := range 41 {
			all = append([]*Run{add("ws-a", i, cycle[i%len(cycle)], false)}, all...)
		}
		for i := range 5 {
			add("ws-b", i, Pending, false)
		}
		add("ws-a", 900, Planning, true) // an assessment: in no list
		slices.SortFunc(all, func(a, b *Run) int {
			if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(b.ID, a.ID)
		})
		ids := func(rs []*Run) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		for _, o := range []ListOptions{
			{},
			{Statuses: []string{"pending", "planned"}},
			{StatusGroup: "final"}, {StatusGroup: "non_final"}, {StatusGroup: "discardable"},
			{Operations: []string{"destroy"}},
			{Commit: "abc"},
		} {
			var want []*Run
			for _, r := range all {
				if o.match(r) {
					want = append(want, r)
				}
			}
			for _, pg := range [][2]int{{0, 10}, {10, 10}, {30, 20}, {100, 5}} {
				o.Offset, o.Limit = pg[0], pg[1]
				got, total, err := s.workspacePage(ctx, "ws-a", o)
				if err != nil {
					t.Fatalf("%+v: %v", o, err)
				}
				w := want[min(pg[0], len(want)):min(pg[0]+pg[1], len(want))]
				if total != len(want) || !slices.Equal(ids(got), ids(w)) {
					t.Fatalf("%+v: got %d of %d %v, want %d of %d %v", o, len(got), total, ids(got), len(w), len(want), ids(w))
				}
			}
		}
		if counted, err := s.RunsCount(ctx, "ws-a"); err != nil || counted != len(all) {
			t.Fatalf("run count of ws-a: %d (%v), want %d", counted, err, len(all))
		}
		if counted, err := s.RunsCount(ctx, "ws-none"); err != nil || counted != 0 {
			t.Fatalf("run count of a workspace without runs: %d (%v), want 0", counted, err)
		}
		// Deleting a workspace's runs deletes its counter too.
		if err := DeleteWorkspaceRuns(ctx, db, "ws-b"); err != nil {
			t.Fatal(err)
		}
		var left int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM run_counts WHERE workspace_id = ?`, "ws-b").Scan(&left); err != nil || left != 0 {
			t.Fatalf("ws-b's run counter after its runs were deleted: %d rows (%v)", left, err)
		}
		positions, err := s.QueuePositions(ctx, all)
		if err != nil {
			t.Fatal(err)
		}
		pending := 0
		for _, r := range all {
			if want := s.PositionInQueue(ctx, r); positions[r.ID] != want {
				t.Fatalf("queue position of %s (%s): %d in one query, %d alone", r.ID, r.Status, positions[r.ID], want)
			}
			if positions[r.ID] > 0 {
				pending++
			}
		}
		if pending == 0 {
			t.Fatal("no run of the list has a queue position: the check above proves nothing")
		}
	})
}

// TestStatusSetsFromStateMachine: the SQL status sets are the state
// machine's predicates, status by status.
func TestStatusSetsFromStateMachine(t *testing.T) {
	t.Parallel()
	in := func(set string, s Status) bool { return slices.Contains(splitSQL(set), string(s)) }
	if len(statuses()) < 25 {
		t.Fatalf("only %d statuses read from the transition table", len(statuses()))
	}
	for _, s := range statuses() {
		for name, c := range map[string]struct {
			set  string
			want bool
		}{
			"executing": {sqlExecuting, s.Executing()}, "queued": {sqlQueued, s.Queued()}, "running": {sqlRunning, s.Running()},
			"final": {statusGroups["final"], s.Final()}, "non_final": {statusGroups["non_final"], !s.Final()},
			"discardable": {statusGroups["discardable"], s.Discardable()},
		} {
			if in(c.set, s) != c.want {
				t.Errorf("%s: in the %s set %v, state machine says %v", s, name, in(c.set, s), c.want)
			}
		}
	}
}

func splitSQL(set string) []string {
	var out []string
	cur := ""
	for _, c := range set {
		switch c {
		case '(', ')', '\'':
		case ',':
			out = append(out, cur)
			cur = ""
		default:
			cur += string(c)
		}
	}
	return append(out, cur)
}
