package run

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/workspace"
)

// TestForceExecuteBesideOtherWork: a force-execute whose transaction
// overlaps another's that changes the runs ahead acts on what that other
// transaction committed. On PostgreSQL it read the runs ahead without
// locking them: a run confirmed meanwhile was discarded over its
// confirmation, and a run started meanwhile was not seen at all (the
// force-execute "succeeded" and its run stayed pending behind it). Both
// stores; SQLite's transactions never overlap.
func TestForceExecuteBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"the holder is confirmed", "the holder ends and the next run starts"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { forceExecuteBeside(t, db, name) })
		})
	}
}

func forceExecuteBeside(t *testing.T, db *store.DB, name string) {
	ctx := asOwner()
	now := core.Now().UnixMicro()
	if _, err := db.Exec(ctx, `INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)`, "org-acme", "acme", "ops@acme.test", now, now); err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.Open(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := workspace.NewService(db, nil)
	service := func(t *testing.T, wsID string) *Service {
		if _, err := db.Exec(ctx, `INSERT INTO workspaces (id, organization_name, project_id, name, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`, wsID, "acme", "prj-x", wsID, now, now); err != nil {
			t.Fatal(err)
		}
		return NewService(Options{DB: db, Blobs: blobs, Configs: fakeConfigs{}, Workspaces: realLock{
			fakeWorkspaces{&Workspace{ID: wsID, Name: wsID, Organization: "acme", ExecutionMode: "remote"}}, ws}})
	}
	// planned creates a run and takes it to planned (it holds the
	// workspace and waits for a decision).
	planned := func(t *testing.T, s *Service, wsID string) *Run {
		a, err := s.Create(ctx, CreateOptions{WorkspaceID: wsID})
		if err != nil {
			t.Fatal(err)
		}
		j, err := s.Claim(ctx, "runner-"+wsID)
		if err != nil || j == nil || j.RunID != a.ID {
			t.Fatalf("claim: %+v, %v", j, err)
		}
		if _, err := s.FinishPlan(ctx, j.ID, "runner-"+wsID, PlanResult{HasChanges: true, Additions: 1}); err != nil {
			t.Fatal(err)
		}
		return a
	}
	// beside runs change in a transaction held open once it has
	// written, while a force-execute of id starts; it returns the
	// force-execute's error.
	beside := func(t *testing.T, s *Service, id string, change func(tx *store.Tx) error) error {
		t.Helper()
		wrote, commit, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- db.Tx(ctx, func(tx *store.Tx) error {
				if err := change(tx); err != nil {
					return err
				}
				close(wrote)
				<-commit
				return nil
			})
		}()
		select {
		case <-wrote:
		case err := <-done:
			t.Fatalf("the other transaction: %v", err)
		}
		forced := make(chan error, 1)
		go func() { forced <- s.ForceExecute(ctx, id) }()
		select {
		case err := <-forced: // it did not wait for the other transaction
			forced <- err
		case <-time.After(300 * time.Millisecond):
		}
		close(commit)
		if err := <-done; err != nil {
			t.Fatalf("the other transaction: %v", err)
		}
		return <-forced
	}
	status := func(t *testing.T, s *Service, id string) Status {
		t.Helper()
		r, err := s.get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}

	switch name {
	case "the holder is confirmed":
		s := service(t, "ws-confirmed")
		a := planned(t, s, "ws-confirmed")
		b, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-confirmed"})
		if err != nil {
			t.Fatal(err)
		}
		err = beside(t, s, b.ID, func(tx *store.Tx) error {
			r, err := getRun(ctx, tx, s.Keys, "id", a.ID, true)
			if err != nil {
				return err
			}
			if err := r.transition(Confirmed); err != nil {
				return err
			}
			return updateRun(ctx, tx, r)
		})
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("force-execute beside the confirmation of the run ahead: %v, want a conflict", err)
		}
		if got := status(t, s, a.ID); got != Confirmed {
			t.Fatalf("the run confirmed beside the force-execute is %s, want %s", got, Confirmed)
		}
		if got := status(t, s, b.ID); got != Pending {
			t.Fatalf("the run whose force-execute was refused is %s, want %s", got, Pending)
		}

	case "the holder ends and the next run starts":
		s := service(t, "ws-moved")
		a := planned(t, s, "ws-moved")
		b, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-moved"})
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Create(ctx, CreateOptions{WorkspaceID: "ws-moved"})
		if err != nil {
			t.Fatal(err)
		}
		err = beside(t, s, c.ID, func(tx *store.Tx) error {
			r, err := getRun(ctx, tx, s.Keys, "id", a.ID, true)
			if err != nil {
				return err
			}
			if err := r.transition(Discarded); err != nil {
				return err
			}
			_, err = s.release(ctx, tx, r) // b takes the workspace
			return err
		})
		if got := status(t, s, b.ID); got != PlanQueued {
			t.Fatalf("the run after the discarded holder is %s, want %s", got, PlanQueued)
		}
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("force-execute of %s behind %s, started beside it: %v (the run is %s), want a conflict", c.ID, b.ID, err, status(t, s, c.ID))
		}
	}
}
