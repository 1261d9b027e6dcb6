package loops

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/terracehq/terrace/internal/store"
)

// LeaderKey is the PostgreSQL advisory lock key of the loops that run once
// per cluster ("terrace" in ASCII).
const LeaderKey int64 = 0x74657272616365

// Leader runs the loops registered with Go on one replica of the cluster at
// a time: the one that holds the leadership lock (store.DB.TryLead). The
// others try again every Retry; when the leader's connection dies, the
// database frees the lock and a survivor takes the loops over.
type Leader struct {
	// DB holds the lock (required).
	DB *store.DB
	// Replica names this server in logs and in Changes.
	Replica string
	// Key is the lock (LeaderKey when 0).
	Key int64
	// Retry is how often a follower tries to lead (1s when 0); Check how
	// often a leader checks its lock connection (1s when 0).
	Retry, Check time.Duration
	Logger       *slog.Logger
	// OnChange hears every change of leadership of this replica.
	OnChange func(leading bool)

	mu      sync.Mutex
	loops   []leaderLoop
	leading bool
	changed chan struct{}
}

type leaderLoop struct {
	name string
	fn   func(ctx context.Context)
}

// Go registers fn as a loop that runs only while this replica leads (call
// before Run). fn runs under a context that ends when leadership is lost.
func (l *Leader) Go(name string, fn func(ctx context.Context)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.loops = append(l.loops, leaderLoop{name, fn})
}

// Leading reports whether this replica leads now.
func (l *Leader) Leading() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leading
}

// Changed returns a channel closed at the next change of leadership (tests
// wait on it instead of sleeping).
func (l *Leader) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
	}
	return l.changed
}

func (l *Leader) set(leading bool) {
	l.mu.Lock()
	l.leading = leading
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	l.mu.Unlock()
	if l.OnChange != nil {
		l.OnChange(leading)
	}
}

// Run campaigns for leadership until ctx ends, running the registered
// loops whenever this replica leads. It returns after they have stopped.
func (l *Leader) Run(ctx context.Context) {
	logger := l.Logger
	if logger == nil {
		logger = slog.Default()
	}
	key, retry, check := l.Key, l.Retry, l.Check
	if key == 0 {
		key = LeaderKey
	}
	if retry <= 0 {
		retry = time.Second
	}
	if check <= 0 {
		check = time.Second
	}
	for {
		lease, err := l.DB.TryLead(ctx, key, check)
		if err != nil && ctx.Err() == nil {
			logger.Warn("trying to lead the cluster's background loops", "error", err)
		}
		wait := retry
		if lease != nil && l.lead(ctx, lease, logger) {
			// Its lock connection died under it: the other replicas,
			// trying every retry, get a few tries before this one tries
			// again, so that a healthy replica takes the loops over.
			wait = lostLeaderWait * retry
		}
		if ctx.Err() != nil {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// lostLeaderWait is how many retries a replica that lost its lease sits
// out before it campaigns again.
const lostLeaderWait = 3

// lead runs the loops until the lease is lost (it returns true) or ctx
// ends.
func (l *Leader) lead(ctx context.Context, lease *store.Leadership, logger *slog.Logger) bool {
	l.mu.Lock()
	loops := append([]leaderLoop(nil), l.loops...)
	l.mu.Unlock()
	g := NewGroup(ctx, logger)
	for _, lp := range loops {
		g.Go(lp.name, lp.fn)
	}
	logger.Info("this replica leads the cluster's background loops", "replica", l.Replica, "loops", len(loops))
	l.set(true)
	lost := false
	select {
	case <-ctx.Done():
	case <-lease.Lost():
		lost = true
		logger.Warn("this replica lost the leadership of the cluster's background loops", "replica", l.Replica)
	}
	g.Stop()
	lease.Release()
	l.set(false)
	return lost
}
