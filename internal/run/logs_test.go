package run

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestConcurrentLogAppends: writers appending to one log at once (a runner's
// periodic shipper and a size-triggered flush) all land, on both stores.
func TestConcurrentLogAppends(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		if err := s.startLog(ctx, db, "plan-test", true); err != nil {
			t.Fatal(err)
		}
		const writers = 24
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.AppendLog(ctx, "plan-test", []byte(fmt.Sprintf("line %02d\n", i)))
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("append: %v", err)
			}
		}
		// A chunk appended by a replica of the version before last_seq (in
		// a rolling upgrade its append reads MAX(seq) and moves nothing
		// else) is followed, not collided with.
		if _, err := db.Exec(ctx, `INSERT INTO log_chunks (log_id, seq, data)
			SELECT 'plan-test', MAX(seq) + 1, ? FROM log_chunks WHERE log_id = 'plan-test'`, []byte("old replica\n")); err != nil {
			t.Fatal(err)
		}
		// One more append is one statement, outside any transaction.
		before := db.Queries()
		if err := s.AppendLog(ctx, "plan-test", []byte("last line\n")); err != nil {
			t.Fatal(err)
		}
		if n := db.Queries() - before; n != 1 {
			t.Errorf("an append took %d store statements, want 1", n)
		}
		if err := s.endLog(ctx, "plan-test", ""); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLog(ctx, "plan-test", []byte("too late\n")); core.KindOf(err) != core.KindConflict {
			t.Errorf("an append to an ended log: %v, want a conflict", err)
		}
		log, err := s.ReadLog(ctx, "plan-test", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(string(log), "old replica\nlast line\n"+etx) {
			t.Errorf("the last append is not last: %q", log)
		}
		for i := range writers {
			if !strings.Contains(string(log), fmt.Sprintf("line %02d\n", i)) {
				t.Fatalf("line %02d was lost:\n%q", i, log)
			}
		}
		if !strings.HasPrefix(string(log), stx) || !strings.HasSuffix(string(log), etx) {
			t.Fatalf("log is not framed with STX/ETX: %q", log)
		}
	})
}
