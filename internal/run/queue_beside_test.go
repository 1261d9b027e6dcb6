package run

import (
	"context"
	"errors"
	"testing"

	"github.com/terracehq/terrace/internal/blob"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/workspace"
)

// TestQueueBesideOtherWork: a change to a workspace's queue whose
// transaction overlaps another's that changes the same runs acts on what
// that other transaction committed, and never writes over it. Each case
// failed on PostgreSQL before its fix (2026-11-30), where such reads were
// not locked: a force-execute discarded a run confirmed meanwhile, and a
// run started meanwhile (its force-execute "succeeded" and its run stayed
// pending behind it); a run ending started the next pending run over its
// cancel. Both stores; SQLite's transactions never overlap.
func TestQueueBesideOtherWork(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"force-execute: the holder is confirmed",
		"force-execute: the holder ends and the next run starts",
		"the holder ends: the next run is canceled",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			storetest.ForEachDB(t, func(t *testing.T, db *store.DB) { queueBeside(t, db, name) })
		})
	}
}

func queueBeside(t *testing.T, db *store.DB, name string) {
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
	// written, while act starts; it returns act's error.
	beside := func(t *testing.T, change func(tx *store.Tx) error, act func() error) error {
		t.Helper()
		return storetest.Beside(t, db, change, act)
	}
	status := func(t *testing.T, s *Service, id string) Status {
		t.Helper()
		r, err := s.get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r.Status
	}

	// move takes run id to status to in tx, releasing its workspace
	// (and starting the next run) when release.
	move := func(s *Service, tx *store.Tx, id string, to Status, release bool) error {
		r, err := getRun(ctx, tx, s.Keys, "id", id, true)
		if err != nil {
			return err
		}
		if err := r.transition(to); err != nil {
			return err
		}
		if release {
			_, err = s.release(ctx, tx, r)
			return err
		}
		return updateRun(ctx, tx, r)
	}
	create := func(s *Service, wsID string) *Run {
		r, err := s.Create(ctx, CreateOptions{WorkspaceID: wsID})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}

	switch name {
	case "force-execute: the holder is confirmed":
		s := service(t, "ws-confirmed")
		a, b := planned(t, s, "ws-confirmed"), create(s, "ws-confirmed")
		err := beside(t, func(tx *store.Tx) error { return move(s, tx, a.ID, Confirmed, false) },
			func() error { return s.ForceExecute(ctx, b.ID) })
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("force-execute beside the confirmation of the run ahead: %v, want a conflict", err)
		}
		if got := status(t, s, a.ID); got != Confirmed {
			t.Fatalf("the run confirmed beside the force-execute is %s, want %s", got, Confirmed)
		}
		if got := status(t, s, b.ID); got != Pending {
			t.Fatalf("the run whose force-execute was refused is %s, want %s", got, Pending)
		}

	case "force-execute: the holder ends and the next run starts":
		s := service(t, "ws-moved")
		a, b, c := planned(t, s, "ws-moved"), create(s, "ws-moved"), create(s, "ws-moved")
		err := beside(t, func(tx *store.Tx) error { return move(s, tx, a.ID, Discarded, true) }, // b takes the workspace
			func() error { return s.ForceExecute(ctx, c.ID) })
		if got := status(t, s, b.ID); got != PlanQueued {
			t.Fatalf("the run after the discarded holder is %s, want %s", got, PlanQueued)
		}
		if !errors.Is(err, core.ErrConflict) {
			t.Fatalf("force-execute of %s behind %s, started beside it: %v (the run is %s), want a conflict", c.ID, b.ID, err, status(t, s, c.ID))
		}

	case "the holder ends: the next run is canceled":
		s := service(t, "ws-canceled")
		a, b := planned(t, s, "ws-canceled"), create(s, "ws-canceled")
		if err := beside(t, func(tx *store.Tx) error { return move(s, tx, b.ID, Canceled, true) },
			func() error { return s.Discard(ctx, a.ID, "") }); err != nil {
			t.Fatalf("discarding the holder beside the cancel of the next run: %v", err)
		}
		if got := status(t, s, b.ID); got != Canceled {
			t.Fatalf("the run canceled while the holder ended is %s, want %s", got, Canceled)
		}
		if w, err := ws.System(ctx, "ws-canceled"); err != nil || w.LockKind != "" {
			t.Fatalf("the workspace with no run left is held by %+v (%v)", w, err)
		}
	}
}
