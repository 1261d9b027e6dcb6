package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/outbox"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// wait fails the test unless ch sends within a minute: a bound against
// hanging, not a timing assertion.
func wait[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
	var zero T
	return zero
}

// running starts q.Run and returns a stop that waits for it.
func running(t *testing.T, q *outbox.Queue, claimant, lostPrefix string) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx, claimant, lostPrefix) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

func newQueue(t *testing.T, o outbox.Options) *outbox.Queue {
	t.Helper()
	if o.Backoff == 0 {
		o.Backoff, o.MaxBackoff = time.Millisecond, time.Millisecond
	}
	q, err := outbox.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// TestEnqueueFollowsTheTransaction: an item exists exactly when the
// transaction that enqueued it committed, once per key, and is handled
// once with its lane and payload; a handled item leaves the outbox, and
// so do a forgotten lane's items.
func TestEnqueueFollowsTheTransaction(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		got := make(chan outbox.Item, 10)
		q := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			got <- it
			return nil, nil
		}})
		rollback := errors.New("rolled back")
		if err := db.Tx(ctx, func(tx *store.Tx) error {
			if _, err := q.Enqueue(ctx, tx, outbox.Message{Key: "lost", Payload: "x"}); err != nil {
				return err
			}
			return rollback
		}); !errors.Is(err, rollback) {
			t.Fatal(err)
		}
		if err := db.Tx(ctx, func(tx *store.Tx) error {
			n, err := q.Enqueue(ctx, tx, outbox.Message{Key: "k1", Lane: "l", Payload: "p1"}, outbox.Message{Key: "k1", Payload: "again"})
			if err == nil && n != 1 {
				err = fmt.Errorf("enqueued %d new items, want 1 (the key twice)", n)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, db, outbox.Message{Key: "gone", Lane: "deleted"}); err != nil {
			t.Fatal(err)
		}
		if err := q.ForgetLane(ctx, db, "deleted"); err != nil {
			t.Fatal(err)
		}
		if n, err := q.Pending(ctx); err != nil || n != 1 {
			t.Fatalf("Pending = %d, %v; want 1 (neither the rolled back item nor the forgotten lane's)", n, err)
		}
		running(t, q, "c-1", "")
		it := wait(t, got, "the item to be handled")
		if it.Key != "k1" || it.Lane != "l" || it.Payload != "p1" || it.Attempts != 1 || it.Last {
			t.Fatalf("handled %+v", it)
		}
		waitNonePending(t, q)
		if _, err := q.Get(ctx, "k1"); core.KindOf(err) != core.KindNotFound {
			t.Fatalf("a handled item is still in the outbox: %v", err)
		}
		select {
		case it := <-got:
			t.Fatalf("handled twice: %+v", it)
		default:
		}
	})
}

// waitState polls the store until key's state satisfies ok (the outcome
// is recorded just after the handler returns).
func waitState(t *testing.T, q *outbox.Queue, key string, ok func(outbox.State, error) bool) outbox.State {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		s, err := q.Get(context.Background(), key)
		if ok(s, err) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("item %s: state %+v, %v never came", key, s, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitNonePending polls the store until q has no pending item (outcomes
// are recorded just after the handler returns).
func waitNonePending(t *testing.T, q *outbox.Queue) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		n, err := q.Pending(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d items still pending", n)
		}
	}
}

// TestRetryThenGiveUp: a failing handler is called again after a backoff
// until MaxAttempts; the last attempt knows it is the last, and the item
// ends failed with the attempts and the last error as its reason. A
// Permanent error fails an item at once.
func TestRetryThenGiveUp(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		calls := make(chan outbox.Item, 10)
		q := newQueue(t, outbox.Options{DB: db, Topic: "t", MaxAttempts: 3, Handle: func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			calls <- it
			if it.Key == "bad" {
				return nil, outbox.Permanent(errors.New("not worth retrying"))
			}
			return nil, fmt.Errorf("refused (%d)", it.Attempts)
		}})
		// Outcomes are heard after their record commits: the test waits
		// for each rather than reading them once the item shows failed.
		outcomes := make(chan outbox.Outcome, 10)
		q.OnAttempt(func(topic string, o outbox.Outcome) {
			if topic == "t" {
				outcomes <- o
			}
		})
		if _, err := q.Enqueue(ctx, db, outbox.Message{Key: "flaky"}); err != nil {
			t.Fatal(err)
		}
		running(t, q, "c-1", "")
		for n := 1; n <= 3; n++ {
			it := wait(t, calls, "an attempt")
			if it.Attempts != n || it.Last != (n == 3) {
				t.Fatalf("attempt %d: %+v", n, it)
			}
		}
		s := waitState(t, q, "flaky", func(s outbox.State, err error) bool { return err == nil && s.Status == outbox.Failed })
		if s.Attempts != 3 || s.LastError != "gave up after 3 attempts: refused (3)" {
			t.Fatalf("failed item: %+v", s)
		}
		var heard []outbox.Outcome
		for range 3 {
			heard = append(heard, wait(t, outcomes, "an attempt's outcome"))
		}
		if got := fmt.Sprint(heard); got != "[retry retry failed]" {
			t.Fatalf("outcomes heard: %s", got)
		}

		if _, err := q.Enqueue(ctx, db, outbox.Message{Key: "bad"}); err != nil {
			t.Fatal(err)
		}
		q.Wake().Signal()
		wait(t, calls, "the permanent failure")
		s = waitState(t, q, "bad", func(s outbox.State, err error) bool { return err == nil && s.Status == outbox.Failed })
		if s.Attempts != 1 || s.LastError != "not worth retrying" {
			t.Fatalf("permanently failed item: %+v", s)
		}
		if n, err := q.Pending(ctx); err != nil || n != 0 {
			t.Fatalf("Pending = %d, %v; failed items are not pending", n, err)
		}
		select {
		case it := <-calls:
			t.Fatalf("a failed item was handled again: %+v", it)
		default:
		}
	})
}

// claim makes key look claimed by claimant until until (as a process that
// died mid-handling leaves it).
func claim(t *testing.T, db *store.DB, key, claimant string, until time.Time) {
	t.Helper()
	if _, err := db.Exec(context.Background(), `UPDATE outbox_items SET status = 'claimed', claimed_by = ?, attempts = 1, next_attempt_at = ? WHERE topic = 't' AND item_key = ?`,
		claimant, core.Micros(until), key); err != nil {
		t.Fatal(err)
	}
}

// TestTakeBack: at start-up the claims of this server's earlier processes
// are taken back at once; another process's claim only once it expired.
func TestTakeBack(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		got := make(chan outbox.Item, 10)
		q := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			got <- it
			return nil, nil
		}})
		if _, err := q.Enqueue(ctx, db, outbox.Message{Key: "mine"}, outbox.Message{Key: "theirs"}); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		claim(t, db, "mine", "notify-replica1-old", later)
		claim(t, db, "theirs", "notify-replica2-xyz", later)
		stop := running(t, q, "notify-replica1-new", "notify-replica1-")
		it := wait(t, got, "the earlier process's item")
		if it.Key != "mine" || it.Attempts != 2 {
			t.Fatalf("handled %+v first, want mine on its second attempt", it)
		}
		waitState(t, q, "mine", func(_ outbox.State, err error) bool { return core.KindOf(err) == core.KindNotFound })
		stop() // once the loop has returned, it has not taken the live claim
		if s, err := q.Get(ctx, "theirs"); err != nil || s.Status != outbox.Claimed {
			t.Fatalf("another replica's live claim: %+v, %v", s, err)
		}
		select {
		case it := <-got:
			t.Fatalf("took another replica's live claim: %+v", it)
		default:
		}
		claim(t, db, "theirs", "notify-replica2-xyz", time.Now().Add(-time.Second))
		running(t, q, "notify-replica1-newer", "notify-replica1-")
		if it := wait(t, got, "the expired claim"); it.Key != "theirs" {
			t.Fatalf("handled %+v, want theirs", it)
		}
	})
}

// TestClaimantsShareWithoutDoubles: two processes working one topic (two
// replicas that both believe they lead) handle every item exactly once.
func TestClaimantsShareWithoutDoubles(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const items = 60
		var mu sync.Mutex
		handled := map[string]int{}
		all := make(chan struct{})
		handle := func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			time.Sleep(time.Millisecond) // widen the window for a double claim
			mu.Lock()
			handled[it.Key]++
			if len(handled) == items {
				select {
				case <-all:
				default:
					close(all)
				}
			}
			mu.Unlock()
			return nil, nil
		}
		a := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: handle, Workers: 4})
		b := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: handle, Workers: 4})
		var msgs []outbox.Message
		for i := range items {
			msgs = append(msgs, outbox.Message{Key: fmt.Sprintf("k%02d", i), Lane: fmt.Sprintf("lane%d", i%5)})
		}
		if _, err := a.Enqueue(ctx, db, msgs...); err != nil {
			t.Fatal(err)
		}
		running(t, a, "trigger-a-1", "trigger-a-")
		running(t, b, "trigger-b-1", "trigger-b-")
		wait(t, all, "every item to be handled")
		waitNonePending(t, a)
		mu.Lock()
		defer mu.Unlock()
		var twice []string
		for k, n := range handled {
			if n != 1 {
				twice = append(twice, fmt.Sprintf("%s×%d", k, n))
			}
		}
		if len(twice) > 0 || len(handled) != items {
			t.Fatalf("handled %d distinct items, some more than once: %s", len(handled), strings.Join(twice, " "))
		}
	})
}

// TestOneProcessKeepsLanesSerial: within one process, a lane's items are
// handled one at a time, while other lanes proceed.
func TestOneProcessKeepsLanesSerial(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		var mu sync.Mutex
		inLane := map[string]int{}
		overlap := ""
		count := 0
		all := make(chan struct{})
		q := newQueue(t, outbox.Options{DB: db, Topic: "t", Workers: 8, Handle: func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			mu.Lock()
			inLane[it.Lane]++
			if inLane[it.Lane] > 1 {
				overlap = it.Lane
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // widen the window for an overlap
			mu.Lock()
			inLane[it.Lane]--
			if count++; count == 30 {
				close(all)
			}
			mu.Unlock()
			return nil, nil
		}})
		var msgs []outbox.Message
		for i := range 30 {
			msgs = append(msgs, outbox.Message{Key: fmt.Sprintf("k%02d", i), Lane: fmt.Sprintf("lane%d", i%3)})
		}
		if _, err := q.Enqueue(ctx, db, msgs...); err != nil {
			t.Fatal(err)
		}
		running(t, q, "c-1", "")
		wait(t, all, "every item to be handled")
		mu.Lock()
		defer mu.Unlock()
		if overlap != "" {
			t.Fatalf("two items of %s were handled at once", overlap)
		}
	})
}

// TestDueLater: an item enqueued for later is not handled before then; a
// queue's Hold keeps new items back while that process runs, and a
// process started without it handles them at once.
func TestDueLater(t *testing.T) {
	t.Parallel()
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		got := make(chan outbox.Item, 4)
		handle := func(_ context.Context, it outbox.Item) (func(outbox.Outcome), error) {
			got <- it
			return nil, nil
		}
		passes := make(chan struct{}, 100)
		held := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: handle, Hold: time.Hour,
			Each: func(context.Context) { passes <- struct{}{} }})
		if _, err := held.Enqueue(ctx, db, outbox.Message{Key: "later", At: time.Now().Add(time.Hour)}, outbox.Message{Key: "held"}); err != nil {
			t.Fatal(err)
		}
		stop := running(t, held, "c-1", "")
		wait(t, passes, "a pass of the holding queue")
		stop()
		for _, key := range []string{"later", "held"} {
			if s, err := held.Get(ctx, key); err != nil || s.Status != outbox.Pending || s.Attempts != 0 {
				t.Fatalf("%s after a pass of the holding queue: %+v, %v", key, s, err)
			}
		}
		if len(got) != 0 {
			t.Fatalf("the holding queue handled %+v", <-got)
		}

		q := newQueue(t, outbox.Options{DB: db, Topic: "t", Handle: handle, Each: func(context.Context) { passes <- struct{}{} }})
		stop = running(t, q, "c-2", "")
		if it := wait(t, got, "the held item"); it.Key != "held" {
			t.Fatalf("handled %s first", it.Key)
		}
		waitState(t, q, "held", func(_ outbox.State, err error) bool { return core.KindOf(err) == core.KindNotFound })
		stop()
		if s, err := q.Get(ctx, "later"); err != nil || s.Status != outbox.Pending || s.Attempts != 0 {
			t.Fatalf("the later item: %+v, %v", s, err)
		}
	})
}
