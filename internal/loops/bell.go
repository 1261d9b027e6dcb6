package loops

import (
	"context"
	"log/slog"
	"time"

	"github.com/terracehq/terrace/internal/store"
)

// Bell carries a wake-up to every other replica: Ring (cheap, never
// blocks, safe from any goroutine) asks the bell's loop to send one
// store.DB.NotifyOthers on its channel; rings that come while one is being
// sent merge into the next. The ringing replica is not woken again: who
// rings (Wake.Signal) has woken its own loop, and an in-process delivery
// would wake every loop of the replica (each idle runner's claim a
// transaction) for work that is not theirs.
type Bell struct {
	db      *store.DB
	channel string
	logger  *slog.Logger
	rung    chan struct{}
}

// NewBell returns a bell on channel; its loop (Run) must be started.
func NewBell(db *store.DB, channel string, logger *slog.Logger) *Bell {
	if logger == nil {
		logger = slog.Default()
	}
	return &Bell{db: db, channel: channel, logger: logger, rung: make(chan struct{}, 1)}
}

// Ring asks for a wake-up of every listener of the bell's channel.
func (b *Bell) Ring() {
	select {
	case b.rung <- struct{}{}:
	default:
	}
}

// Run sends the wake-ups rung until ctx ends.
func (b *Bell) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.rung:
			if err := b.db.NotifyOthers(ctx, b.channel); err != nil && ctx.Err() == nil {
				b.logger.Warn("sending a wake-up", "channel", b.channel, "error", err)
			}
		}
	}
}

// Listen calls wake for every notification of channel until ctx ends,
// listening again (after retry) when the connection fails. Callers keep a
// slow poll as well: a notification sent while no connection listened is
// lost.
func Listen(ctx context.Context, db *store.DB, channel string, retry time.Duration, logger *slog.Logger, wake func()) {
	if logger == nil {
		logger = slog.Default()
	}
	for {
		err := db.Listen(ctx, channel, wake)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			logger.Warn("listening for wake-ups", "channel", channel, "error", err)
		}
		// Whatever was notified while nobody listened: wake once.
		wake()
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// Wake is a loop's wake-up: a one-slot signal the loop selects on (C).
// Signal wakes the loop and announces the wake-up to other replicas (the
// function set with Announce, the server's Bell.Ring); Local only wakes
// the loop (the server calls it when another replica announced work).
type Wake struct {
	c        chan struct{}
	announce func()
}

// NewWake returns a wake-up with nothing announced.
func NewWake() *Wake { return &Wake{c: make(chan struct{}, 1)} }

// C is the channel the loop waits on.
func (w *Wake) C() <-chan struct{} { return w.c }

// Announce sets fn, called at every Signal; set it before the loops start.
func (w *Wake) Announce(fn func()) { w.announce = fn }

// Local wakes the loop without telling other replicas.
func (w *Wake) Local() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// Signal wakes the loop and announces it.
func (w *Wake) Signal() {
	w.Local()
	if w.announce != nil {
		w.announce()
	}
}
