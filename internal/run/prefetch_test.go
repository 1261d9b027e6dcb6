package run

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// TestPrefetchRelations: a page of runs gets its events and comments in
// one query, and what each run then renders from the request memo is
// what it reads on its own (order included, runs without events too),
// on both stores.
func TestPrefetchRelations(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		var page []*Run
		for i := range 5 {
			r := &Run{ID: fmt.Sprintf("run-p%d", i), WorkspaceID: "ws-p", Organization: "acme", ConfigurationVersionID: "cv-x",
				Status: Applied, Timestamps: Stamps{}, CreatedAt: time.Date(2026, 1, 1, 0, 0, i, 0, time.UTC),
				Plan: Phase{ID: fmt.Sprintf("plan-p%d", i)}, Apply: Phase{ID: fmt.Sprintf("apply-p%d", i)}}
			if err := insertRun(ctx, db, nil, r); err != nil {
				t.Fatal(err)
			}
			page = append(page, r)
			for j := range i % 3 { // runs 0 and 3 have no events
				if err := addEvent(ctx, db, r.ID, "queued", fmt.Sprintf("event %d", j), "user-x"); err != nil {
					t.Fatal(err)
				}
			}
			if i == 2 {
				if _, err := addComment(ctx, db, r.ID, "looks good", "user-x"); err != nil {
					t.Fatal(err)
				}
			}
		}
		type rel struct{ events, comments []string }
		want := map[string]rel{}
		for _, r := range page {
			ev, cm, err := s.relations(ctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			want[r.ID] = rel{ev, cm}
		}
		if len(want["run-p2"].events) != 3 || len(want["run-p2"].comments) != 1 {
			t.Fatalf("run-p2's own relations: %+v, want three events and a comment", want["run-p2"])
		}
		mctx := core.WithMemo(ctx)
		before := db.Queries()
		if err := s.prefetchRelations(mctx, page); err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			ev, cm, err := s.relations(mctx, r.ID)
			if err != nil {
				t.Fatal(err)
			}
			if w := want[r.ID]; !slices.Equal(ev, w.events) || !slices.Equal(cm, w.comments) {
				t.Errorf("%s from the page: %v, %v; on its own: %v, %v", r.ID, ev, cm, w.events, w.comments)
			}
		}
		if n := db.Queries() - before; n != 1 {
			t.Errorf("the page's relations took %d queries, want 1", n)
		}
	})
}
