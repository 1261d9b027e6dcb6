package run

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/workspace"
)

// realLock is fakeWorkspaces with the workspace domain's own lock
// statements, on a workspace row in the store.
type realLock struct {
	fakeWorkspaces
	ws *workspace.Service
}

func (f realLock) LockForRun(ctx context.Context, q store.Q, wsID, runID string) (bool, error) {
	return f.ws.LockForRun(ctx, q, wsID, runID)
}
func (f realLock) LockQueue(ctx context.Context, q store.Q, wsID string) error {
	return f.ws.LockQueue(ctx, q, wsID)
}

// TestRunCreatedWhileTheHolderEnds: a run created while the run holding
// its workspace ends, their transactions side by side, is started by one
// of the two. On PostgreSQL each read the other's work uncommitted: the
// ending run found no pending run to start, the new run found the
// workspace still held, and the new run stayed pending for good (seen in
// the end-to-end tests, a `terraform apply` waiting forever behind an
// applied run). Both stores; SQLite's transactions never overlapped.
func TestRunCreatedWhileTheHolderEnds(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := asOwner()
		now := core.Now().UnixMicro()
		if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`, "ws-s", "acme", "prj-x", "s", now, now); err != nil {
			t.Fatal(err)
		}
		blobs, err := blob.Open(context.Background(), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := NewService(Options{DB: db, Blobs: blobs, Configs: fakeConfigs{}, Workspaces: realLock{
			fakeWorkspaces{&Workspace{ID: "ws-s", Name: "s", Organization: "acme", ExecutionMode: "remote"}}, workspace.NewService(db, nil)}})
		yes := true
		for round := range 3 {
			// The holder, planned and applying.
			a, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-s", AutoApply: &yes})
			if err != nil {
				t.Fatal(err)
			}
			j, err := s.Claim(ctx, "runner-s")
			if err != nil || j == nil || j.RunID != a.ID {
				t.Fatalf("round %d: claim: %+v, %v", round, j, err)
			}
			if cont, err := s.FinishPlan(ctx, j.ID, "runner-s", PlanResult{HasChanges: true, Additions: 1}); err != nil || !cont {
				t.Fatalf("round %d: finishing the plan: %v, %v", round, cont, err)
			}
			// The holder ends in a transaction that waits, once it has
			// read the queue, until the new run's creation has had its
			// chance to run.
			read, commit, ended := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				ended <- db.Tx(ctx, func(tx *store.Tx) error {
					r, err := getRun(ctx, tx, s.Keys, "id", a.ID, true)
					if err != nil {
						return err
					}
					if err := r.transition(Applied); err != nil {
						return err
					}
					if _, err := s.release(ctx, tx, r); err != nil {
						return err
					}
					close(read)
					<-commit
					return nil
				})
			}()
			<-read
			created := make(chan error, 1)
			var b *Run
			go func() {
				var err error
				b, err = s.Create(ctx, CreateOptions{WorkspaceID: "ws-s", AutoApply: &yes})
				created <- err
			}()
			select {
			case err := <-created: // it did not wait for the holder's transaction
				created <- err
			case <-time.After(300 * time.Millisecond):
			}
			close(commit)
			if err := <-ended; err != nil {
				t.Fatalf("round %d: ending the holder: %v", round, err)
			}
			if err := <-created; err != nil {
				t.Fatalf("round %d: creating the next run: %v", round, err)
			}
			got, err := s.get(ctx, b.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != PlanQueued {
				t.Fatalf("round %d: the run created while the holder ended is %s, want %s: nothing will start it", round, got.Status, PlanQueued)
			}
			// Finish it, so that the next round's holder is the only run.
			j, err = s.Claim(ctx, "runner-s")
			if err != nil || j == nil || j.RunID != b.ID {
				t.Fatalf("round %d: claim of the next run: %+v, %v", round, j, err)
			}
			if cont, err := s.FinishPlan(ctx, j.ID, "runner-s", PlanResult{HasChanges: true, Additions: 1}); err != nil || !cont {
				t.Fatalf("round %d: finishing the next run's plan: %v, %v", round, cont, err)
			}
			if err := s.FinishApply(ctx, j.ID, "runner-s", ApplyResult{Additions: 1}, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}
