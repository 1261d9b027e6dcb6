package forward_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/forward"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// A request waits for an agent of its pool, which takes it once and
// reports the answer; agents of another pool never see it; one nobody
// took in time is never given; the body is sealed while it waits.
func TestForwardThroughAPool(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		keys, err := seal.Open(ctx, db, seal.Source{DataDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		storetest.Seed(t, db,
			[]any{`INSERT INTO organizations (id, name, email, created_at, updated_at) VALUES ('org-acme', 'acme', 'a@acme.test', 0, 0)`},
			[]any{`INSERT INTO agent_pools (id, organization_name, name, organization_scoped, created_at) VALUES ('apool-a', 'acme', 'a', ?, 0)`, true},
			[]any{`INSERT INTO agent_pools (id, organization_name, name, organization_scoped, created_at) VALUES ('apool-b', 'acme', 'b', ?, 0)`, true})
		f := forward.New(db, keys)
		f.Poll, f.ClaimPoll = 10*time.Millisecond, 20*time.Millisecond

		type answer struct {
			res forward.Result
			err error
		}
		done := make(chan answer, 1)
		go func() {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			res, err := f.Do(ctx, "apool-a", "http://tasks.internal.test/hook", map[string]string{"X-TFC-Task-Signature": "sig"}, []byte(`{"access_token":"secret-token"}`))
			done <- answer{res, err}
		}()
		// The other pool's agent waits in vain.
		wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if got, err := f.Claim(wctx, "apool-b", "agent-b"); err != nil || got != nil {
			t.Fatalf("an agent of another pool took %+v, %v", got, err)
		}
		cancel()
		var sealed string
		if err := db.QueryRow(ctx, `SELECT body FROM agent_forwards`).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if !keys.IsSealed(forward.BodyColumn.Purpose, sealed) {
			t.Errorf("the waiting body is stored unsealed: %.30s", sealed)
		}
		got, err := f.Claim(ctx, "apool-a", "agent-a")
		if err != nil || got == nil {
			t.Fatalf("the pool's agent got %+v, %v", got, err)
		}
		if got.URL != "http://tasks.internal.test/hook" || string(got.Body) != `{"access_token":"secret-token"}` || got.Header["X-TFC-Task-Signature"] != "sig" ||
			got.Timeout <= 0 || got.Timeout > 10*time.Second {
			t.Errorf("claimed %+v", got)
		}
		// Taken once.
		wctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		if again, _ := f.Claim(wctx, "apool-a", "agent-a2"); again != nil {
			t.Errorf("a second agent took the same request")
		}
		cancel()
		if err := f.Report(ctx, "apool-a", "agent-a2", got.ID, forward.Result{Status: 500}); core.KindOf(err) != core.KindNotFound {
			t.Errorf("another agent's report: %v, want not found", err)
		}
		if err := f.Report(ctx, "apool-a", "agent-a", got.ID, forward.Result{Status: 200}); err != nil {
			t.Fatal(err)
		}
		a := <-done
		if a.err != nil || a.res.Status != 200 {
			t.Fatalf("the sender got %+v, %v", a.res, a.err)
		}
		var left int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM agent_forwards`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d requests left after the answer (%v)", left, err)
		}

		// Nobody takes it in time: the sender hears so, and it is gone.
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if _, err := f.Do(short, "apool-a", "http://tasks.internal.test/hook", nil, []byte("{}")); !errors.Is(err, forward.ErrNoAgent) {
			t.Errorf("a request nobody took: %v, want ErrNoAgent", err)
		}
		wctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		if late, _ := f.Claim(wctx, "apool-a", "agent-a"); late != nil {
			t.Errorf("a request whose sender gave up was given: %+v", late)
		}
		if _, err := f.Do(ctx, "apool-a", "http://x", nil, nil); err == nil {
			t.Error("a request without a deadline was stored")
		}
		// A request a stopped sender left behind goes with the next one.
		if _, err := db.Exec(ctx, `INSERT INTO agent_forwards (id, pool_id, url, header, body, status, created_at, expires_at) VALUES ('fwd-left', 'apool-b', 'http://x', '{}', '', 'pending', 0, 1)`); err != nil {
			t.Fatal(err)
		}
		short2, cancel2 := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel2()
		_, _ = f.Do(short2, "apool-a", "http://x", nil, nil)
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM agent_forwards WHERE id = 'fwd-left'`).Scan(&left); err != nil || left != 0 {
			t.Errorf("a long expired request is still stored (%d, %v)", left, err)
		}
		// No agent running: at once, and nothing is stored.
		f.Live = func(ctx context.Context, pool string) (bool, error) { return pool != "apool-a", nil }
		long, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		start := time.Now()
		if _, err := f.Do(long, "apool-a", "http://tasks.internal.test/hook", nil, []byte("{}")); !errors.Is(err, forward.ErrNoAgent) || time.Since(start) > 5*time.Second {
			t.Errorf("a pool without a running agent: %v after %s, want ErrNoAgent at once", err, time.Since(start))
		}
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM agent_forwards`).Scan(&left); err != nil || left != 0 {
			t.Errorf("%d requests stored for a pool without agents (%v)", left, err)
		}
	})
}
