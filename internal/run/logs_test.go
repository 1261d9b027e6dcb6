package run

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestReportCarriesTheLogsEnd: the end of a phase's log that comes with
// the report (PlanResult.Log) follows the chunks sent before it and
// precedes the error the report gives, and the log is closed, on both
// stores.
func TestReportCarriesTheLogsEnd(t *testing.T) {
	t.Parallel()
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		r := &Run{ID: "run-tail", WorkspaceID: "ws-a", Organization: "acme", ConfigurationVersionID: "cv-x", Status: Planning,
			Timestamps: Stamps{}, PlanOnly: true, CreatedAt: core.Now(), Plan: Phase{ID: "plan-tail"}, Apply: Phase{ID: "apply-tail"}}
		if err := insertRun(ctx, db, nil, r); err != nil {
			t.Fatal(err)
		}
		now := core.Micros(core.Now())
		if _, err := db.Exec(ctx, `INSERT INTO jobs (id, run_id, phase, status, queue, agent_pool_id, runner_id, lease_expires_at, created_at, updated_at) VALUES (?, ?, ?, 'running', 'runs', '', 'runner-1', ?, ?, ?)`,
			"job-tail", r.ID, string(PhasePlan), core.Micros(core.Now().Add(time.Hour)), now, now); err != nil {
			t.Fatal(err)
		}
		if err := s.startLog(ctx, db, r.Plan.ID, true); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLog(ctx, r.Plan.ID, []byte("streamed line\n")); err != nil {
			t.Fatal(err)
		}
		cont, err := s.FinishPlan(ctx, "job-tail", "runner-1", PlanResult{Error: "terraform plan failed", Log: []byte("last line\nno newline")})
		if err != nil || cont {
			t.Fatalf("FinishPlan = %v, %v; want no apply and no error", cont, err)
		}
		log, err := s.ReadLog(ctx, r.Plan.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if want := stx + "streamed line\nlast line\nno newline\nterraform plan failed\n" + etx; string(log) != want {
			t.Fatalf("log = %q, want %q", log, want)
		}
		if got, err := s.get(ctx, r.ID); err != nil || got.Status != Errored {
			t.Fatalf("run after the report: %v, %v; want errored", got, err)
		}
	})
}

// TestFoldShowsTheTailBeforeTheOutcome: the end of a phase's output,
// which comes with its report, is readable from the running log as soon
// as the log is folded, before the outcome is committed (a reader that
// then learns the phase is done has read it all); the blob holds the
// same bytes and the ETX, and a log without chunks still folds.
func TestFoldShowsTheTailBeforeTheOutcome(t *testing.T) {
	eachStore(t, func(t *testing.T, ctx context.Context, db *store.DB, s *Service) {
		if err := s.startLog(ctx, db, "apply-fold", true); err != nil {
			t.Fatal(err)
		}
		if err := s.AppendLog(ctx, "apply-fold", []byte("Initializing...\n")); err != nil {
			t.Fatal(err)
		}
		if err := s.foldLog(ctx, "apply-fold", "Apply complete!\n"); err != nil {
			t.Fatal(err)
		}
		running, err := s.ReadLog(ctx, "apply-fold", 0, 0)
		if err != nil || string(running) != stx+"Initializing...\nApply complete!\n" {
			t.Fatalf("the running log after the fold: %q (%v), want its tail and no ETX yet", running, err)
		}
		if err := dropChunks(ctx, db, "apply-fold"); err != nil {
			t.Fatal(err)
		}
		ended, err := s.ReadLog(ctx, "apply-fold", 0, 0)
		if err != nil || string(ended) != string(running)+etx {
			t.Fatalf("the ended log: %q (%v), want %q and the ETX", ended, err, string(running))
		}
		if err := s.foldLog(ctx, "never-opened", "error text\n"); err != nil {
			t.Fatal(err)
		}
		if got, err := s.ReadLog(ctx, "never-opened", 0, 0); err != nil || string(got) != stx+"error text\n"+etx {
			t.Fatalf("a log folded without chunks: %q (%v)", got, err)
		}
	})
}
