// Package outbox is Terrace's one durable delivery: work that must happen
// after a transaction commits, at least once, even when the server dies
// in between (a notification to send, a run task request, the dependent
// runs of an apply). A domain enqueues an item in its own transaction; the
// item's Queue claims it when it is due, calls the domain's Handler, and
// deletes it once handled, or retries it with backoff, or gives up after
// MaxAttempts and keeps it as failed with the reason. Every item lives in
// one table, outbox_items, keyed by topic (the domain's queue) and key;
// docs/design/cluster.md describes the claims and docs/design/outbox.md
// draws the lifecycle.
//
//	pending ──claim──► claimed ──handled──► (deleted)
//	   ▲                 │  ▲
//	   └─ error: backoff ┤  └─ claim expired: another claimant takes it
//	                     └── last attempt failed, or Permanent ──► failed (kept Retention)
//
// Claims name their claimant and expire (ClaimTTL), so two processes that
// both think they lead never handle one item at once, and an item whose
// claimant died is taken again: at once by the next process of the same
// server (Run's lostPrefix), by anyone once the claim expired.
package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/store"
)

// Status is an item's place in its lifecycle; moves is the whole state
// machine. A handled item is deleted, so it has no status.
type Status string

// Item statuses.
const (
	Pending Status = "pending" // waiting until next_attempt_at
	Claimed Status = "claimed" // a claimant handles it; next_attempt_at is the end of the claim
	Failed  Status = "failed"  // given up (final): last_error says why
)

var moves = map[Status][]Status{
	Pending: {Claimed},
	Claimed: {Claimed, Pending, Failed}, // claimed → claimed: an expired claim taken over
}

// Message is an item to enqueue.
type Message struct {
	// Key identifies the item within its topic; enqueueing a key already
	// queued is a no-op.
	Key string
	// Lane, when set, groups items handled one at a time (notify: one
	// request in flight per configuration).
	Lane string
	// Payload is the domain's data, handed back to its Handler.
	Payload string
	// At is when the item becomes due; zero is now.
	At time.Time
}

// Item is a claimed item as its Handler sees it.
type Item struct {
	Key, Lane, Payload string
	// Attempts counts the attempts so far, this one included.
	Attempts int
	// Last is true when a failure of this attempt is final.
	Last bool
	// CreatedAt is when the item was enqueued.
	CreatedAt time.Time
}

// Handler handles one claimed item. A nil error means handled (the item
// is deleted). An error is retried after a backoff, unless the attempt was
// the last (Item.Last) or the error is Permanent: then the item fails with
// the error as its reason. after, if not nil, hears the outcome once it is
// recorded (the domain's metrics). A handler must be idempotent: a process
// that dies after handling but before recording hands the item to the
// next. When ctx ends the outcome is not recorded.
type Handler func(ctx context.Context, it Item) (after func(Outcome), err error)

type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// Permanent marks err as not worth retrying: the item fails at once.
func Permanent(err error) error { return permanent{err} }

// Outcome is what became of one attempt, as OnAttempt hears it.
type Outcome string

// Attempt outcomes.
const (
	Handled Outcome = "handled" // the handler succeeded; the item is gone
	Retry   Outcome = "retry"   // the handler failed; tried again after a backoff
	Gave    Outcome = "failed"  // the handler failed for good; the item is failed
)

// Options configure a Queue.
type Options struct {
	DB *store.DB
	// Topic names the queue in outbox_items (and in metrics).
	Topic  string
	Handle Handler
	Logger *slog.Logger
	// MaxAttempts ends retrying. Defaults to 10.
	MaxAttempts int
	// Backoff is the wait after a first failed attempt; it doubles up to
	// MaxBackoff. Default 1s and 1m.
	Backoff, MaxBackoff time.Duration
	// ClaimTTL is how long a claimed item stays away from other
	// claimants: longer than a handler takes. Defaults to 5m.
	ClaimTTL time.Duration
	// Workers bounds the handlers running at once. Defaults to 8; 1
	// handles items one by one, oldest first.
	Workers int
	// Poll is the loop's slowest pace (a safety net besides wake-ups).
	// Defaults to 2s.
	Poll time.Duration
	// Each, if set, runs at every pass of the loop (timeouts the domain
	// watches on the same pace).
	Each func(ctx context.Context)
	// Retention is how long failed items are kept. Defaults to 7 days.
	Retention time.Duration
	// Hold keeps every item this long after it was enqueued before it is
	// first due (0: at once). It is the running process's setting, not
	// the item's: a process started without it handles held items at once.
	Hold time.Duration
}

// Queue is one topic of the outbox.
type Queue struct {
	o         Options
	wake      *loops.Wake
	onAttempt []func(topic string, o Outcome)
}

// New validates o and returns its queue.
func New(o Options) (*Queue, error) {
	if o.DB == nil || o.Topic == "" || o.Handle == nil {
		return nil, errors.New("outbox: DB, Topic and Handle are required")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = 10
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = time.Minute
	}
	if o.ClaimTTL <= 0 {
		o.ClaimTTL = 5 * time.Minute
	}
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.Poll <= 0 {
		o.Poll = 2 * time.Second
	}
	if o.Retention <= 0 {
		o.Retention = 7 * 24 * time.Hour
	}
	return &Queue{o: o, wake: loops.NewWake()}, nil
}

// Wake is the queue's wake-up: Signal it once an enqueueing transaction
// committed (the server announces it to other replicas and wakes the
// queue when they announce theirs).
func (q *Queue) Wake() *loops.Wake { return q.wake }

// OnAttempt registers fn to hear every attempt this process records
// (metrics). Call it before Run; fn must be quick.
func (q *Queue) OnAttempt(fn func(topic string, o Outcome)) { q.onAttempt = append(q.onAttempt, fn) }

// Enqueue adds msgs in db, which is usually the caller's transaction (so
// the items exist exactly when what caused them does), and reports how
// many were new. It does not wake the queue: Signal Wake after commit.
func (q *Queue) Enqueue(ctx context.Context, db store.Q, msgs ...Message) (int, error) {
	now := core.Now()
	n := 0
	for _, m := range msgs {
		at := m.At
		if at.IsZero() {
			at = now
		}
		res, err := db.Exec(ctx, `INSERT INTO outbox_items (topic, item_key, lane, payload, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 0, ?, '', '', ?, ?) ON CONFLICT (topic, item_key) DO NOTHING`,
			q.o.Topic, m.Key, m.Lane, m.Payload, string(Pending), core.Micros(at), core.Micros(now), core.Micros(now))
		if err != nil {
			return n, fmt.Errorf("queueing %s %s: %w", q.o.Topic, m.Key, err)
		}
		if k, err := res.RowsAffected(); err == nil {
			n += int(k)
		}
	}
	return n, nil
}

// ForgetLane deletes every item of lane in db (usually the transaction
// that deletes what the lane delivers to). A handler still running on one
// of them finds its outcome unrecorded.
func (q *Queue) ForgetLane(ctx context.Context, db store.Q, lane string) error {
	_, err := db.Exec(ctx, `DELETE FROM outbox_items WHERE topic = ? AND lane = ?`, q.o.Topic, lane)
	return err
}

// Pending counts the items not yet handled nor failed.
func (q *Queue) Pending(ctx context.Context) (int, error) {
	var n int
	err := q.o.DB.QueryRow(ctx, `SELECT COUNT(*) FROM outbox_items WHERE topic = ? AND status IN (?, ?)`, q.o.Topic, string(Pending), string(Claimed)).Scan(&n)
	return n, err
}

// State is an item's stored state, for operators and tests.
type State struct {
	Status    Status
	Attempts  int
	LastError string
}

// Get returns the state of the item key; a core not-found error once it
// was handled (or never queued).
func (q *Queue) Get(ctx context.Context, key string) (State, error) {
	var s State
	err := q.o.DB.QueryRow(ctx, `SELECT status, attempts, last_error FROM outbox_items WHERE topic = ? AND item_key = ?`, q.o.Topic, key).Scan(&s.Status, &s.Attempts, &s.LastError)
	if store.IsNoRows(err) {
		return s, core.NotFound("%s %s is not in the outbox", q.o.Topic, key)
	}
	return s, err
}

// backoff is the wait after the n-th failed attempt: Backoff doubled each
// time, capped at MaxBackoff.
func (q *Queue) backoff(n int) time.Duration {
	d := q.o.Backoff
	for i := 1; i < n && d < q.o.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, q.o.MaxBackoff)
}

// move changes an item's status if the table allows it and the row is
// still as the caller saw it: at from, claimed by claimedBy, due at
// nextAt (when nextAt >= 0). It reports whether the row moved.
func move(ctx context.Context, db store.Q, topic, key string, from, to Status, claimedBy string, nextAt int64, set string, args ...any) (bool, error) {
	if !slices.Contains(moves[from], to) {
		return false, fmt.Errorf("an outbox item cannot go from %s to %s", from, to)
	}
	query := `UPDATE outbox_items SET status = ?, updated_at = ?`
	if set != "" {
		query += ", " + set
	}
	query += ` WHERE topic = ? AND item_key = ? AND status = ? AND claimed_by = ?`
	all := append([]any{string(to), core.Micros(core.Now())}, args...)
	all = append(all, topic, key, string(from), claimedBy)
	if nextAt >= 0 {
		query += ` AND next_attempt_at = ?`
		all = append(all, nextAt)
	}
	res, err := db.Exec(ctx, query, all...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

type due struct {
	key, lane, payload, claimedBy string
	status                        Status
	attempts                      int
	nextAt, createdAt             int64
}

// Run handles due items until ctx ends, then waits for the handlers in
// flight (which end with ctx). claimant names this process in claims;
// claims of other processes whose names start with lostPrefix (earlier
// processes of the same server) are taken back at once, any other claim
// when it expires.
func (q *Queue) Run(ctx context.Context, claimant, lostPrefix string) {
	if lostPrefix != "" {
		if _, err := q.o.DB.Exec(ctx, `UPDATE outbox_items SET status = ?, claimed_by = '', next_attempt_at = ?, updated_at = ? WHERE topic = ? AND status = ? AND claimed_by LIKE ? AND claimed_by <> ?`,
			string(Pending), core.Micros(core.Now()), core.Micros(core.Now()), q.o.Topic, string(Claimed), lostPrefix+"%", claimant); err != nil && ctx.Err() == nil {
			q.o.Logger.Error("taking back the outbox items of an earlier process", "topic", q.o.Topic, "error", err)
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	var pruned time.Time
	var mu sync.Mutex
	busy := map[string]bool{} // keys and lanes being handled
	running := 0
	done := make(chan struct{}, 1)
	for {
		if time.Since(pruned) > time.Hour {
			pruned = time.Now()
			if _, err := q.o.DB.Exec(ctx, `DELETE FROM outbox_items WHERE topic = ? AND status = ? AND updated_at < ?`,
				q.o.Topic, string(Failed), core.Micros(core.Now().Add(-q.o.Retention))); err != nil && ctx.Err() == nil {
				q.o.Logger.Error("pruning failed outbox items", "topic", q.o.Topic, "error", err)
			}
		}
		mu.Lock()
		free := q.o.Workers - running
		mu.Unlock()
		wait := q.o.Poll
		if free > 0 {
			rows, err := store.All(ctx, q.o.DB, func(sc store.Scanner) (due, error) {
				var d due
				err := sc.Scan(&d.key, &d.lane, &d.payload, &d.status, &d.claimedBy, &d.attempts, &d.nextAt, &d.createdAt)
				return d, err
			}, `SELECT item_key, lane, payload, status, claimed_by, attempts, next_attempt_at, created_at FROM outbox_items WHERE topic = ? AND status IN (?, ?) AND next_attempt_at <= ? AND created_at <= ? ORDER BY next_attempt_at, item_key LIMIT 100`,
				q.o.Topic, string(Pending), string(Claimed), core.Micros(core.Now()), core.Micros(core.Now().Add(-q.o.Hold)))
			if err != nil && ctx.Err() == nil {
				q.o.Logger.Error("reading the outbox", "topic", q.o.Topic, "error", err)
			}
			for _, d := range rows {
				mu.Lock()
				skip := busy["k:"+d.key] || (d.lane != "" && busy["l:"+d.lane]) || running >= q.o.Workers
				mu.Unlock()
				if skip {
					continue
				}
				// Claim the row as it was read (an expired claim is taken
				// over in the same move): another claimant that read it
				// too finds it changed.
				ok, err := move(ctx, q.o.DB, q.o.Topic, d.key, d.status, Claimed, d.claimedBy, d.nextAt,
					"claimed_by = ?, attempts = attempts + 1, next_attempt_at = ?", claimant, core.Micros(core.Now().Add(q.o.ClaimTTL)))
				if err != nil || !ok {
					continue
				}
				it := Item{Key: d.key, Lane: d.lane, Payload: d.payload, Attempts: d.attempts + 1, CreatedAt: core.FromMicros(d.createdAt)}
				it.Last = it.Attempts >= q.o.MaxAttempts
				mu.Lock()
				busy["k:"+d.key] = true
				if d.lane != "" {
					busy["l:"+d.lane] = true
				}
				running++
				mu.Unlock()
				wg.Add(1)
				go func() {
					defer wg.Done()
					q.handle(ctx, claimant, it)
					mu.Lock()
					delete(busy, "k:"+it.Key)
					if it.Lane != "" {
						delete(busy, "l:"+it.Lane)
					}
					running--
					mu.Unlock()
					select {
					case done <- struct{}{}:
					default:
					}
				}()
			}
			// Sleep until the next item falls due. One due already was
			// left for a reason (its lane is busy, another claimant took
			// it): a handler finishing wakes the loop (done), or the poll.
			if next, err := q.nextDue(ctx); err == nil && next > 0 {
				if until := time.Until(core.FromMicros(next)); until > 0 {
					wait = min(wait, until)
				}
			}
		}
		if q.o.Each != nil {
			q.o.Each(ctx)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-q.wake.C():
		case <-done:
		case <-t.C:
		}
		t.Stop()
	}
}

func (q *Queue) nextDue(ctx context.Context) (int64, error) {
	var next *int64
	err := q.o.DB.QueryRow(ctx, `SELECT MIN(next_attempt_at) FROM outbox_items WHERE topic = ? AND status = ? AND created_at <= ?`,
		q.o.Topic, string(Pending), core.Micros(core.Now().Add(-q.o.Hold))).Scan(&next)
	if err != nil || next == nil {
		return 0, err
	}
	return *next, nil
}

// handle runs the handler on one claimed item and records the outcome,
// only while the claim is still this claimant's.
func (q *Queue) handle(ctx context.Context, claimant string, it Item) {
	after, err := q.o.Handle(ctx, it)
	if ctx.Err() != nil {
		return // the claim is taken back after a restart, or when it expires
	}
	var outcome Outcome
	var recorded bool
	var recErr error
	var pe permanent
	switch {
	case err == nil:
		outcome = Handled
		var res sql.Result
		res, recErr = q.o.DB.Exec(ctx, `DELETE FROM outbox_items WHERE topic = ? AND item_key = ? AND status = ? AND claimed_by = ?`,
			q.o.Topic, it.Key, string(Claimed), claimant)
		if recErr == nil {
			n, _ := res.RowsAffected()
			recorded = n == 1
		}
	case errors.As(err, &pe):
		outcome = Gave
		recorded, recErr = move(ctx, q.o.DB, q.o.Topic, it.Key, Claimed, Failed, claimant, -1, "claimed_by = '', last_error = ?", pe.err.Error())
	case it.Last:
		outcome = Gave
		recorded, recErr = move(ctx, q.o.DB, q.o.Topic, it.Key, Claimed, Failed, claimant, -1, "claimed_by = '', last_error = ?",
			"gave up after "+strconv.Itoa(it.Attempts)+" attempts: "+err.Error())
	default:
		outcome = Retry
		recorded, recErr = move(ctx, q.o.DB, q.o.Topic, it.Key, Claimed, Pending, claimant, -1, "claimed_by = '', last_error = ?, next_attempt_at = ?",
			err.Error(), core.Micros(core.Now().Add(q.backoff(it.Attempts))))
	}
	if recErr != nil {
		if ctx.Err() == nil {
			q.o.Logger.Error("recording an outbox item", "topic", q.o.Topic, "key", it.Key, "error", recErr)
		}
		return
	}
	if !recorded {
		// The claim expired and another claimant took the item: its
		// outcome is the other's to record.
		return
	}
	if after != nil {
		after(outcome)
	}
	for _, fn := range q.onAttempt {
		fn(q.o.Topic, outcome)
	}
	if outcome == Gave {
		q.o.Logger.Warn("gave up an outbox item", "topic", q.o.Topic, "key", it.Key, "attempts", it.Attempts, "error", err)
	}
}
