package state

import (
	"context"
	"errors"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestInsertFinal: a version stored with its content in one go (a run's
// apply, an inline create) adopts its blob, is finalized with its
// outputs sealed, becomes current and discards the older pending
// versions; when its blob's orphan record is gone (the garbage collector
// took it) nothing of it is kept. On PostgreSQL that is one statement.
func TestInsertFinal(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		keys, err := seal.Open(ctx, db, seal.Source{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		s := &Service{db: db, Keys: keys}
		const ws = "ws-final"
		old := &Version{ID: core.NewID(core.PrefixStateVersion), WorkspaceID: ws, Status: StatusPending, Serial: 1, CreatedAt: core.Now()}
		if err := s.insertVersion(ctx, db, old); err != nil {
			t.Fatal(err)
		}
		pr, err := parseState([]byte(`{"version":4,"terraform_version":"1.11.4","serial":2,"lineage":"L","outputs":{
			"secret":{"value":"hunter2","type":"string","sensitive":true},
			"n":{"value":[1,2],"type":["list","number"]}},"resources":[]}`), 1<<20, nil)
		if err != nil {
			t.Fatal(err)
		}
		store1 := func(key string) (*Version, error) {
			v := &Version{ID: core.NewID(core.PrefixStateVersion), WorkspaceID: ws, Status: StatusPending, Serial: 2, RunID: "run-x", CreatedAt: core.Now()}
			return v, db.Tx(ctx, func(tx *store.Tx) error {
				if _, err := s.lockHead(ctx, tx, ws); err != nil {
					return err
				}
				return s.insertFinal(ctx, tx, v, pr, key, []string{key})
			})
		}

		// Without its orphan record the version is refused and not kept.
		lost, err := store1("state-versions/lost/state")
		if core.KindOf(err) != core.KindConflict || !errors.Is(err, errUploadTooSlow) {
			t.Fatalf("a version whose blob record is gone: %v, want the conflict saying the upload took too long", err)
		}
		if _, err := getVersion(ctx, db, lost.ID, false); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("the refused version was kept: %v", err)
		}

		key := "state-versions/kept/state"
		if _, err := db.Exec(ctx, `INSERT INTO state_blob_orphans (blob_key, created_at) VALUES (?, ?)`, key, core.Micros(core.Now())); err != nil {
			t.Fatal(err)
		}
		v, err := store1(key)
		if err != nil {
			t.Fatal(err)
		}
		got, err := getVersion(ctx, db, v.ID, false)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != StatusFinalized || got.StateKey != key || got.StateSerial != 2 || got.StateLineage != "L" || got.Lineage != "L" ||
			got.StateMD5 != pr.md5 || got.Size != pr.size || got.TerraformVersion != "1.11.4" || got.FinalizedAt == nil || got.RunID != "run-x" {
			t.Fatalf("stored version %+v", got)
		}
		var orphans int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM state_blob_orphans WHERE blob_key = ?`, key).Scan(&orphans); err != nil || orphans != 0 {
			t.Fatalf("the blob's orphan record is still there (%d, %v)", orphans, err)
		}
		var cur string
		if err := db.QueryRow(ctx, `SELECT current_id FROM state_heads WHERE workspace_id = ?`, ws).Scan(&cur); err != nil || cur != v.ID {
			t.Fatalf("current version %q (%v), want %s", cur, err, v.ID)
		}
		if o, err := getVersion(ctx, db, old.ID, false); err != nil || o.Status != StatusDiscarded {
			t.Fatalf("the older pending version: %+v %v, want discarded", o, err)
		}
		outs, err := s.outputs(ctx, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 2 || outs[0].Name != "n" || string(outs[0].Value) != "[1,2]" || outs[1].Name != "secret" || string(outs[1].Value) != `"hunter2"` || !outs[1].Sensitive {
			t.Fatalf("outputs %+v", outs)
		}
		var raw string
		if err := db.QueryRow(ctx, `SELECT value FROM state_version_outputs WHERE state_version_id = ? AND name = 'secret'`, v.ID).Scan(&raw); err != nil || raw == `"hunter2"` {
			t.Fatalf("the output's value at rest is %q (%v): not sealed", raw, err)
		}
	})
}
