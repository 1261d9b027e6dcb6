package loops_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// wait fails the test unless ch is closed (or sends) within a minute: a
// bound against hanging, not a timing assertion.
func wait[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// noLeaks checks, after everything else the test registered has been
// cleaned up, that no goroutine the test started is left (the test must
// not be parallel).
func noLeaks(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) })
}

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestGroupStopWaits: Stop ends every loop's context and returns only once
// every loop has returned; a panicking loop ends alone.
func TestGroupStopWaits(t *testing.T) {
	noLeaks(t)
	g := loops.NewGroup(context.Background(), nil)
	started := make(chan struct{}, 3)
	returned := make(chan struct{}, 3)
	for _, name := range []string{"a", "b", "b"} {
		g.Go(name, func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			returned <- struct{}{}
		})
	}
	panicked := make(chan struct{})
	g.Go("panics", func(ctx context.Context) { defer close(panicked); panic("boom") })
	for range 3 {
		wait(t, started, "a loop to start")
	}
	wait(t, panicked, "the panicking loop")
	if n := g.Running("b"); n != 2 {
		t.Fatalf("Running(b) = %d, want 2", n)
	}
	g.Stop()
	if len(returned) != 3 {
		t.Fatalf("Stop returned with %d of 3 loops returned", len(returned))
	}
	if n := g.Running("a") + g.Running("b") + g.Running("panics"); n != 0 {
		t.Fatalf("%d loops still counted as running after Stop", n)
	}
}

// TestLeaderSQLite: one process owns a SQLite database, so it always leads.
func TestLeaderSQLite(t *testing.T) {
	noLeaks(t)
	db := openDB(t, storetest.SQLiteDSN(t))
	ran := make(chan struct{})
	l := &loops.Leader{DB: db, Replica: "only"}
	l.Go("once", func(ctx context.Context) { close(ran); <-ctx.Done() })
	changed := l.Changed()
	g := loops.NewGroup(context.Background(), nil)
	g.Go("leader", l.Run)
	wait(t, changed, "leadership")
	wait(t, ran, "the leader loop")
	if !l.Leading() {
		t.Fatal("the only SQLite process does not lead")
	}
	g.Stop()
	if l.Leading() {
		t.Fatal("still leading after Stop")
	}
}

// TestLeaderMovesOnPostgres: two replicas on one PostgreSQL database; the
// leader's loops run on one of them only; when the leader's lock
// connection dies (its backend is terminated, as when the process is
// killed) its loops stop and the other replica takes them over.
func TestLeaderMovesOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	dbA, dbB := openDB(t, dsn), openDB(t, dsn)

	type event struct {
		replica string
		running bool
	}
	events := make(chan event, 16)
	newLeader := func(db *store.DB, name string) *loops.Leader {
		l := &loops.Leader{DB: db, Replica: name, Retry: 50 * time.Millisecond, Check: 50 * time.Millisecond}
		l.Go("reaper", func(ctx context.Context) {
			events <- event{name, true}
			<-ctx.Done()
			events <- event{name, false}
		})
		return l
	}
	a, b := newLeader(dbA, "a"), newLeader(dbB, "b")
	g := loops.NewGroup(context.Background(), nil)
	defer g.Stop()
	aLeads := a.Changed()
	g.Go("leader-a", a.Run)
	wait(t, aLeads, "replica a to lead")
	if e := <-events; e != (event{"a", true}) {
		t.Fatalf("first event %+v, want a's loop running", e)
	}
	g.Go("leader-b", b.Run)

	// b campaigns but must not lead while a holds the lock: its
	// campaign loop tries again and again. Check a few of its tries.
	var backends int
	for range 5 {
		if err := dbB.QueryRow(context.Background(), `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&backends); err != nil {
			t.Fatal(err)
		}
		if b.Leading() || backends != 1 {
			t.Fatalf("b leads=%v with %d advisory locks granted while a leads", b.Leading(), backends)
		}
	}

	// Kill a's lock connection from the outside.
	bLeads := b.Changed()
	aLost := a.Changed()
	var killed bool
	if err := dbB.QueryRow(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminating the leader's connection: %v (%v)", killed, err)
	}
	wait(t, aLost, "replica a to lose the lead")
	wait(t, bLeads, "replica b to take the lead over")
	got := map[event]bool{}
	for range 2 {
		got[<-events] = true
	}
	if !got[event{"a", false}] || !got[event{"b", true}] {
		t.Fatalf("after the takeover the loops did %v, want a's stopped and b's running", got)
	}
	if !b.Leading() {
		t.Fatal("b does not lead after a's connection died")
	}
	// a lost its connection, not its process: it now follows.
	if a.Leading() {
		t.Fatal("a still leads after losing its lock connection")
	}
}

// TestNotify: a bell rung through one DB reaches a listener on another DB
// of the same database (PostgreSQL: LISTEN/NOTIFY; the bell wakes the
// other replicas only); on SQLite, whose database has no other replica, a
// Notify reaches the DB's listeners in process.
func TestNotify(t *testing.T) {
	t.Parallel()
	for _, st := range []string{"sqlite", "postgres"} {
		t.Run(st, func(t *testing.T) {
			t.Parallel()
			var sender, listener *store.DB
			if st == "postgres" {
				dsn := storetest.PostgresDSN(t)
				sender, listener = openDB(t, dsn), openDB(t, dsn)
			} else {
				sender = openDB(t, storetest.SQLiteDSN(t))
				listener = sender
			}
			woke := make(chan struct{}, 1)
			g := loops.NewGroup(context.Background(), nil)
			defer g.Stop()
			g.Go("listen", func(ctx context.Context) {
				loops.Listen(ctx, listener, "terrace_test", time.Second, nil, func() {
					select {
					case woke <- struct{}{}:
					default:
					}
				})
			})
			bell := loops.NewBell(sender, "terrace_test", nil)
			g.Go("bell", bell.Run)
			// The listener may not be listening yet: ring until it hears
			// (each ring is a real notification; none is lost once it listens).
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(time.Minute)
			for {
				if st == "postgres" {
					bell.Ring()
				} else if err := sender.Notify(context.Background(), "terrace_test"); err != nil {
					t.Fatal(err)
				}
				select {
				case <-woke:
					return
				case <-tick.C:
				case <-deadline:
					t.Fatal("no wake-up reached the listener")
				}
			}
		})
	}
	if err := openDB(t, storetest.SQLiteDSN(t)).Notify(context.Background(), "bad channel; DROP"); err == nil {
		t.Fatal("an invalid channel name was accepted")
	}
}

// TestBellSkipsItsOwnReplica: on PostgreSQL a replica's listener is not
// woken by its own bell (NOTIFY comes back to the sender's LISTEN, and the
// domain that rang woke its own loop already), only by other replicas':
// each round rings the listener's own bell and sends its own notification,
// then another replica's once, and the listener never counts more
// wake-ups than the other replica's notifications (its own direct one
// comes first: a session gets notifications in commit order).
func TestBellSkipsItsOwnReplica(t *testing.T) {
	t.Parallel()
	dsn := storetest.PostgresDSN(t)
	self, other := openDB(t, dsn), openDB(t, dsn)
	var mu sync.Mutex
	wakes := 0
	woke := make(chan struct{}, 1)
	g := loops.NewGroup(context.Background(), nil)
	defer g.Stop()
	g.Go("listen", func(ctx context.Context) {
		loops.Listen(ctx, self, "terrace_test_own", time.Second, nil, func() {
			mu.Lock()
			wakes++
			mu.Unlock()
			select {
			case woke <- struct{}{}:
			default:
			}
		})
	})
	ctx := context.Background()
	sent := 0
	// Until the listener listens, the other replica's notifications are
	// lost: send one a tick until the first wake-up.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for heard := false; !heard; {
		if err := other.NotifyOthers(ctx, "terrace_test_own"); err != nil {
			t.Fatal(err)
		}
		sent++
		select {
		case <-woke:
			heard = true
		case <-tick.C:
		case <-deadline:
			t.Fatal("no wake-up reached the listener")
		}
	}
	bell := loops.NewBell(self, "terrace_test_own", nil)
	g.Go("bell", bell.Run)
	for range 5 {
		bell.Ring()
		if err := self.NotifyOthers(ctx, "terrace_test_own"); err != nil {
			t.Fatal(err)
		}
		if err := other.NotifyOthers(ctx, "terrace_test_own"); err != nil {
			t.Fatal(err)
		}
		sent++
		wait(t, woke, "the other replica's wake-up")
		mu.Lock()
		n := wakes
		mu.Unlock()
		if n > sent {
			t.Fatalf("the listener woke %d times for %d notifications of the other replica: its own bell woke it", n, sent)
		}
	}
}
