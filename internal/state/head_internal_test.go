package state

import (
	"context"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestLockHead: taking a workspace's state head, as every run's apply does
// before its new version, reads its current version (once the workspace
// has one, in the same statement that locks the head) and holds the head
// until the transaction ends; a first version finds no head and makes it.
func TestLockHead(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s := &Service{db: db}
		head := func() (cur *Version) {
			t.Helper()
			if err := db.Tx(ctx, func(tx *store.Tx) error {
				var err error
				cur, err = s.lockHead(ctx, tx, "ws-head")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return cur
		}
		if cur := head(); cur != nil {
			t.Fatalf("a workspace without state has current version %s", cur.ID)
		}
		v := &Version{ID: core.NewID(core.PrefixStateVersion), WorkspaceID: "ws-head", Status: StatusFinalized, Serial: 3, Lineage: "L", CreatedAt: core.Now()}
		if err := s.insertVersion(ctx, db, v); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(ctx, `UPDATE state_heads SET current_id = ? WHERE workspace_id = ?`, v.ID, v.WorkspaceID); err != nil {
			t.Fatal(err)
		}
		if cur := head(); cur == nil || cur.ID != v.ID || cur.Serial != 3 || cur.Lineage != "L" || cur.WorkspaceID != "ws-head" {
			t.Fatalf("current version %+v, want %s (serial 3, lineage L)", cur, v.ID)
		}

		// A second taker waits for the first to end.
		held, release, second := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		first := make(chan error, 1)
		go func() {
			first <- db.Tx(ctx, func(tx *store.Tx) error {
				if _, err := s.lockHead(ctx, tx, "ws-head"); err != nil {
					return err
				}
				close(held)
				<-release
				return nil
			})
		}()
		<-held
		go func() {
			second <- db.Tx(ctx, func(tx *store.Tx) error {
				_, err := s.lockHead(ctx, tx, "ws-head")
				return err
			})
		}()
		select {
		case err := <-second:
			t.Fatalf("a second taker got the head while the first held it (err %v)", err)
		case <-time.After(300 * time.Millisecond):
		}
		close(release)
		if err := <-first; err != nil {
			t.Fatal(err)
		}
		if err := <-second; err != nil {
			t.Fatal(err)
		}
	})
}
