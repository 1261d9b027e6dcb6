package runtask

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestPrefetchStageIDs: a page of runs gets its task stage IDs in one
// query, each run's in stage order, and a run without stages an empty
// list: what StageIDsOfRun reads for the run on its own, on both stores.
func TestPrefetchStageIDs(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Service{o: Options{DB: db}}
		var runs []string
		for i := range 3 {
			id := fmt.Sprintf("run-s%d", i)
			insertRun(t, db, id, "ws-s", "applied")
			runs = append(runs, id)
			// Inserted in reverse stage order (ts-i-j is stage j); run-s0 has none.
			for j, st := range slices.Backward(Stages[:i*2]) {
				if _, err := db.Exec(ctx, `INSERT INTO task_stages (`+stageCols+`) VALUES (?, ?, 'acme', 'ws-s', ?, 'pending', '{}', 1, 1)`,
					fmt.Sprintf("ts-%d-%d", i, j), id, string(st)); err != nil {
					t.Fatal(err)
				}
			}
		}
		want := map[string][]string{}
		var err error
		for _, id := range runs {
			if want[id], err = s.StageIDsOfRun(ctx, id); err != nil {
				t.Fatal(err)
			}
		}
		if len(want["run-s0"]) != 0 || len(want["run-s2"]) != 4 || !slices.Equal(want["run-s2"], []string{"ts-2-0", "ts-2-1", "ts-2-2", "ts-2-3"}) {
			t.Fatalf("each run's own stage IDs: %v", want)
		}
		mctx := core.WithMemo(ctx)
		before := db.Queries()
		if err := s.PrefetchStageIDs(mctx, runs); err != nil {
			t.Fatal(err)
		}
		for _, id := range runs {
			got, err := s.StageIDsOfRun(mctx, id)
			if err != nil || !slices.Equal(got, want[id]) || got == nil {
				t.Errorf("%s from the page: %v, %v; on its own %v", id, got, err, want[id])
			}
		}
		if n := db.Queries() - before; n != 1 {
			t.Errorf("the page's stage IDs took %d queries, want 1", n)
		}
	})
}

// insertRun writes the row of a run in workspace ws with the given status,
// as far as this package's tables need one (stages and results point at it).
func insertRun(t *testing.T, db *store.DB, id, ws, status string) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO runs (id, workspace_id, organization_name, configuration_version_id, status, plan_only, assessment, plan_id, apply_id, created_at, updated_at, doc)
		VALUES (?, ?, 'acme', 'cv-x', ?, ?, ?, ?, ?, 1, 1, '{}')`, id, ws, status, false, false, "plan-"+id, "apply-"+id); err != nil {
		t.Fatal(err)
	}
}
