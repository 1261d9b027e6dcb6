package run

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestQueuePositionsFromTheQueueIndex: a page's queue positions come from
// one query that counts through the partial index runs_queue, which holds
// the queue only, so a workspace's history (here 300 applied runs) is not
// read; saved plans, speculative runs and other workspaces do not count;
// on both stores.
func TestQueuePositionsFromTheQueueIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		add := func(id, ws string, status Status, planOnly bool) *Run {
			t.Helper()
			at = at.Add(time.Second)
			r := &Run{ID: id, WorkspaceID: ws, Organization: "acme", ConfigurationVersionID: "cv-x", Status: status, PlanOnly: planOnly,
				Timestamps: Stamps{}, CreatedAt: at, Plan: Phase{ID: "plan-" + id}, Apply: Phase{ID: "apply-" + id}}
			if err := insertRun(ctx, db, nil, r); err != nil {
				t.Fatal(err)
			}
			return r
		}
		if err := db.Tx(ctx, func(tx *store.Tx) error {
			for i := range 300 {
				if err := insertRun(ctx, tx, nil, &Run{ID: fmt.Sprintf("run-h%d", i), WorkspaceID: "ws-q", Organization: "acme", ConfigurationVersionID: "cv-x",
					Status: Applied, Timestamps: Stamps{}, CreatedAt: at.Add(-time.Duration(i+1) * time.Minute),
					Plan: Phase{ID: fmt.Sprintf("plan-h%d", i)}, Apply: Phase{ID: fmt.Sprintf("apply-h%d", i)}}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		add("run-saved", "ws-q", PlannedAndSaved, false)
		add("run-holder", "ws-q", Applying, false)
		add("run-spec", "ws-q", Planning, true)
		p1 := add("run-p1", "ws-q", Pending, false)
		add("run-other", "ws-other", Pending, false)
		p2 := add("run-p2", "ws-q", Pending, false)
		done := add("run-done", "ws-q", Errored, false)
		p3 := add("run-p3", "ws-q", Pending, false)

		before := db.Queries()
		got, err := s.QueuePositions(ctx, []*Run{p3, done, p2, p1})
		if err != nil {
			t.Fatal(err)
		}
		if n := db.Queries() - before; n != 1 {
			t.Errorf("the page's queue positions took %d queries, want 1", n)
		}
		want := map[string]int{"run-p1": 1, "run-p2": 2, "run-p3": 3}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("queue positions %v, want %v", got, want)
		}
		for _, r := range []*Run{p1, p2, p3} {
			if n := s.PositionInQueue(ctx, r); n != want[r.ID] {
				t.Errorf("PositionInQueue(%s) = %d, want %d", r.ID, n, want[r.ID])
			}
		}

		// The count reads runs_queue, on each store's own planner.
		if db.Driver().Name() == "postgres" {
			if _, err := db.Exec(ctx, `ANALYZE runs`); err != nil {
				t.Fatal(err)
			}
		}
		p, err := storetest.QueryPlan(ctx, db, queuePositionsQuery(3), p1.ID, p2.ID, p3.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "runs_queue") {
			t.Errorf("the queue count does not use the index runs_queue:\n%s", p)
		}
	})
}

// TestQueueIndexIsTheQueue: the predicate of the partial index runs_queue
// (a migration, so written out once in SQL) is the queue the state
// machine defines (queueWhere, made from notAhead): every status that
// does not count in the queue is left out of the index, and no other.
func TestQueueIndexIsTheQueue(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		q := `SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'runs_queue'`
		if db.Driver().Name() == "postgres" {
			q = `SELECT indexdef FROM pg_indexes WHERE indexname = 'runs_queue'`
		}
		var def string
		if err := db.QueryRow(ctx, q).Scan(&def); err != nil {
			t.Fatalf("the index runs_queue: %v", err)
		}
		if db.Driver().Name() != "postgres" {
			if !strings.Contains(def, "WHERE "+queueWhere) {
				t.Errorf("runs_queue is %q, want its predicate to be %q", def, queueWhere)
			}
			return
		}
		// PostgreSQL shows the predicate in its own words.
		if !strings.Contains(def, "NOT plan_only") {
			t.Errorf("runs_queue is %q: it should leave speculative runs out", def)
		}
		for _, st := range statuses() {
			in := strings.Contains(def, "'"+string(st)+"'")
			if out := strings.Contains(notAhead, "'"+string(st)+"'"); in != out {
				t.Errorf("runs_queue is %q: status %s named %v, left out of the queue %v", def, st, in, out)
			}
		}
	})
}

// TestSavedPlansFromTheirIndex: the saved plans an apply discards are
// read through the partial index runs_saved_plans, which holds saved
// plans only, so an apply does not read its workspace's history (here 300
// applied runs); on both stores.
func TestSavedPlansFromTheirIndex(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if err := db.Tx(ctx, func(tx *store.Tx) error {
			for i := range 300 {
				st := Applied
				if i%100 == 0 {
					st = PlannedAndSaved
				}
				if err := insertRun(ctx, tx, nil, &Run{ID: fmt.Sprintf("run-h%d", i), WorkspaceID: "ws-sp", Organization: "acme", ConfigurationVersionID: "cv-x",
					Status: st, Timestamps: Stamps{}, CreatedAt: at.Add(time.Duration(i) * time.Minute),
					Plan: Phase{ID: fmt.Sprintf("plan-h%d", i)}, Apply: Phase{ID: fmt.Sprintf("apply-h%d", i)}}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		var stale []*Run
		if err := db.Tx(ctx, func(tx *store.Tx) error {
			var err error
			stale, err = s.discardSavedPlans(ctx, tx, &Run{ID: "run-h100", WorkspaceID: "ws-sp"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range stale {
			ids = append(ids, r.ID)
		}
		slices.Sort(ids)
		if fmt.Sprint(ids) != "[run-h0 run-h200]" {
			t.Errorf("discarded %v, want the other saved plans run-h0 and run-h200", ids)
		}
		for _, id := range ids {
			if r, err := s.get(ctx, id); err != nil || r.Status != Discarded {
				t.Errorf("%s after the discard: %+v, %v", id, r, err)
			}
		}
		if db.Driver().Name() == "postgres" {
			if _, err := db.Exec(ctx, `ANALYZE runs`); err != nil {
				t.Fatal(err)
			}
		}
		p, err := storetest.QueryPlan(ctx, db, `SELECT `+runCols+` FROM runs WHERE `+savedPlansWhere, "ws-sp", "run-h100")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "runs_saved_plans") {
			t.Errorf("the saved plans are not read through runs_saved_plans:\n%s", p)
		}
	})
}

// TestCurrentRunIsTheHeadOfTheQueue: a workspace's current run is the
// run that holds it, or the pending run that takes it next, and the
// newest run when nothing is queued; a run waiting behind another is not
// current (terraform's cloud backend counts a waiting run's place down to
// the current run). The head is read through the queue's index, not the
// workspace's history (here 300 applied runs); on both stores.
func TestCurrentRunIsTheHeadOfTheQueue(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		insert := func(id string, st Status, planOnly bool, minute int) {
			t.Helper()
			if err := db.Tx(ctx, func(tx *store.Tx) error {
				return insertRun(ctx, tx, nil, &Run{ID: id, WorkspaceID: "ws-cur", Organization: "acme", ConfigurationVersionID: "cv-x",
					Status: st, PlanOnly: planOnly, Timestamps: Stamps{}, CreatedAt: at.Add(time.Duration(minute) * time.Minute),
					Plan: Phase{ID: "plan-" + id}, Apply: Phase{ID: "apply-" + id}})
			}); err != nil {
				t.Fatal(err)
			}
		}
		current := func(want string) {
			t.Helper()
			if got, err := s.CurrentRunID(ctx, "ws-cur"); err != nil || got != want {
				t.Errorf("current run %q (%v), want %q", got, err, want)
			}
			var got string
			if err := db.QueryRow(ctx, `SELECT (`+s.CurrentRunIDSQL()+`), (`+s.CurrentRunStatusSQL()+`) FROM (SELECT ? AS id) ws`, "ws-cur").Scan(&got, new(string)); err != nil || got != want {
				t.Errorf("current run in SQL %q (%v), want %q", got, err, want)
			}
		}
		if got, err := s.CurrentRunID(ctx, "ws-cur"); err != nil || got != "" {
			t.Fatalf("a workspace without runs has current run %q (%v)", got, err)
		}
		for i := range 300 {
			insert(fmt.Sprintf("run-h%d", i), Applied, false, i)
		}
		current("run-h299")
		insert("run-held", Planned, false, 300)     // holds the workspace
		insert("run-spec", Planning, true, 301)     // a speculative plan beside it
		insert("run-waiting", Pending, false, 302)  // waits behind the holder
		insert("run-waiting2", Pending, false, 303) // and behind that one
		current("run-held")
		if _, err := db.Exec(ctx, `UPDATE runs SET status = ? WHERE id = ?`, string(Discarded), "run-held"); err != nil {
			t.Fatal(err)
		}
		current("run-waiting") // next to take the workspace (a user's lock may keep it pending)
		if _, err := db.Exec(ctx, `UPDATE runs SET status = ? WHERE id IN (?, ?)`, string(Applied), "run-waiting", "run-waiting2"); err != nil {
			t.Fatal(err)
		}
		current("run-waiting2") // nothing queued: the newest run
		insert("run-spec2", PlannedAndFinished, true, 304)
		current("run-spec2")

		if db.Driver().Name() == "postgres" {
			if _, err := db.Exec(ctx, `ANALYZE runs`); err != nil {
				t.Fatal(err)
			}
		}
		p, err := storetest.QueryPlan(ctx, db, `SELECT `+currentRunSQL("?"), "ws-cur", "ws-cur")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p, "runs_queue") {
			t.Errorf("the head of the queue is not read through runs_queue:\n%s", p)
		}
	})
}
