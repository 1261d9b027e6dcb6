package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/terracehq/terrace/internal/core"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
)

// What several replicas on one database share besides the tables: a
// leadership lock (a PostgreSQL session-level advisory lock held on a
// dedicated connection) and wake-ups (LISTEN/NOTIFY). On SQLite the
// database belongs to one process, so that process always leads and
// wake-ups stay in process.

// Leadership is a cluster-wide lock held on a dedicated connection.
type Leadership struct {
	lost    chan struct{}
	release func()
	once    sync.Once
}

// Lost is closed when the lock is gone: released, or the connection that
// held it failed (the database then frees it for another replica).
func (l *Leadership) Lost() <-chan struct{} { return l.lost }

// Release gives the lock up (idempotent).
func (l *Leadership) Release() { l.once.Do(l.release) }

// TryLead tries once to take the lock named key and returns nil when
// another session holds it. On PostgreSQL the lock is
// pg_try_advisory_lock(key) on a connection of its own, checked every
// check interval while held until ctx ends; on SQLite it is always granted.
func (db *DB) TryLead(ctx context.Context, key int64, check time.Duration) (*Leadership, error) {
	l := &Leadership{lost: make(chan struct{})}
	if db.driver.Name() != "postgres" {
		l.release = func() { close(l.lost) }
		return l, nil
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("connecting for the leader lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&got); err != nil {
		discard(conn)
		return nil, fmt.Errorf("trying the leader lock: %w", err)
	}
	if !got {
		_ = conn.Close()
		return nil, nil
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	l.release = func() {
		close(stop)
		<-done
	}
	go func() {
		defer close(done)
		defer close(l.lost)
		// The lock goes with the session: closing the connection frees it
		// at once, and a connection never goes back to the pool with it.
		defer discard(conn)
		t := time.NewTicker(check)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				pctx, cancel := context.WithTimeout(ctx, check+time.Second)
				err := conn.PingContext(pctx)
				cancel()
				if err != nil {
					return
				}
			}
		}
	}()
	return l, nil
}

// discard closes a dedicated connection's session for good.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(dc any) error {
		if c, ok := dc.(*stdlib.Conn); ok {
			return c.Close()
		}
		return nil
	})
	_ = conn.Close()
}

var channelName = core.NewPattern(`^[a-z_][a-z0-9_]*$`, 1, 63)

// local is the in-process side of wake-ups: the listeners of this DB
// (SQLite has no other). On PostgreSQL the NOTIFY also comes back to this
// DB's own listening connection; it carries origin, the DB's random name,
// so that the listener skips its own echo: the in-process signal woke it
// already, and a second wake-up would cost every loop behind it another
// look at the store (every idle claim a transaction) while a run executes.
type local struct {
	mu     sync.Mutex
	subs   map[string][]chan struct{}
	origin string
}

func (db *DB) locals() *local {
	db.localOnce.Do(func() {
		var b [12]byte
		_, _ = rand.Read(b[:])
		db.local = &local{subs: map[string][]chan struct{}{}, origin: hex.EncodeToString(b[:])}
	})
	return db.local
}

// Notify wakes the listeners of channel in every replica: pg_notify on
// PostgreSQL, an in-process signal on SQLite.
func (db *DB) Notify(ctx context.Context, channel string) error {
	if !channelName.MatchString(channel) {
		return fmt.Errorf("invalid notification channel %q", channel)
	}
	if err := db.guard.check("Notify " + channel); err != nil {
		return err
	}
	l := db.locals()
	l.mu.Lock()
	for _, c := range l.subs[channel] {
		select {
		case c <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	if db.driver.Name() != "postgres" {
		return nil
	}
	core.CountStatement(ctx)
	_, err := db.w.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, l.origin)
	return err
}

// NotifyOthers wakes the listeners of channel in the other replicas only:
// pg_notify on PostgreSQL (this DB's own listener skips the echo), nothing
// on SQLite, whose database has no other replica. For a caller that has
// woken its own loops already: delivering it in process as well would
// wake every loop listening here a second time.
func (db *DB) NotifyOthers(ctx context.Context, channel string) error {
	if !channelName.MatchString(channel) {
		return fmt.Errorf("invalid notification channel %q", channel)
	}
	if err := db.guard.check("Notify " + channel); err != nil {
		return err
	}
	if db.driver.Name() != "postgres" {
		return nil
	}
	core.CountStatement(ctx)
	_, err := db.w.ExecContext(ctx, `SELECT pg_notify($1, $2)`, channel, db.locals().origin)
	return err
}

// Listen calls wake (never concurrently) each time channel is notified,
// until ctx ends or, on PostgreSQL, the listening connection fails (the
// error says why; the caller listens again). A wake-up may stand for
// several notifications.
func (db *DB) Listen(ctx context.Context, channel string, wake func()) error {
	if !channelName.MatchString(channel) {
		return fmt.Errorf("invalid notification channel %q", channel)
	}
	sig := make(chan struct{}, 1)
	l := db.locals()
	l.mu.Lock()
	l.subs[channel] = append(l.subs[channel], sig)
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		subs := l.subs[channel]
		for i, c := range subs {
			if c == sig {
				l.subs[channel] = append(subs[:i:i], subs[i+1:]...)
				break
			}
		}
	}()
	if db.driver.Name() != "postgres" {
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-sig:
				wake()
			}
		}
	}
	conn, err := db.w.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connecting to listen on %s: %w", channel, err)
	}
	defer discard(conn)
	remote := make(chan struct{}, 1)
	errc := make(chan error, 1)
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		errc <- conn.Raw(func(dc any) error {
			c, ok := dc.(*stdlib.Conn)
			if !ok {
				return fmt.Errorf("unexpected PostgreSQL connection type %T", dc)
			}
			pc := c.Conn()
			if _, err := pc.Exec(lctx, "LISTEN "+channel); err != nil {
				return err
			}
			for {
				n, err := pc.WaitForNotification(lctx)
				if err != nil {
					return err
				}
				if n.Payload == l.origin {
					continue // this DB's own Notify, delivered in process already
				}
				select {
				case remote <- struct{}{}:
				default:
				}
			}
		})
	}()
	for {
		select {
		case <-ctx.Done():
			cancel()
			<-errc
			return nil
		case err := <-errc:
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("the connection closed")
			}
			return fmt.Errorf("listening on %s: %w", channel, err)
		case <-sig:
			wake()
		case <-remote:
			wake()
		}
	}
}
