package trigger

import (
	"context"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/outbox"
)

// The fan-out queue is the "trigger-fan-out" topic of the outbox
// (internal/outbox). When a run applies, the observer only enqueues an
// item keyed by the run (one short statement after the run's
// transaction); the outbox claims it when due and calls fanOutItem, which
// queues the dependent runs; the item is deleted once every dependent run
// exists. A server killed in between leaves the item, and the next
// process (or another replica, once the claim expires) does the fan-out.
// Fan-outs are done one at a time, oldest first; one that keeps failing
// is kept as failed after MaxFanOutAttempts, with its reason.

// MaxFanOutAttempts ends retrying a fan-out that keeps failing.
const MaxFanOutAttempts = 10

// fanClaimTTL is how long a claim lasts before another process may take
// the fan-out back.
const fanClaimTTL = 5 * time.Minute

// fanOutTopic is the fan-outs' topic in the outbox.
const fanOutTopic = "trigger-fan-out"

func (s *Service) newFanOutQueue() (*outbox.Queue, error) {
	return outbox.New(outbox.Options{DB: s.o.DB, Topic: fanOutTopic, Handle: s.fanOutItem, Logger: s.o.Logger,
		MaxAttempts: MaxFanOutAttempts, Backoff: time.Second, MaxBackoff: time.Minute, ClaimTTL: fanClaimTTL,
		Workers: 1, Poll: time.Second, Hold: s.o.Hold})
}

// enqueueFanOut records that runID, a run of workspaceID, applied. Seen
// twice, it is queued once.
func (s *Service) enqueueFanOut(ctx context.Context, runID, workspaceID string) error {
	n, err := s.fanOuts.Enqueue(ctx, s.o.DB, outbox.Message{Key: runID, Payload: workspaceID})
	if err == nil && n > 0 {
		s.nudge()
	}
	return err
}

// Run works the fan-out queue until ctx ends. claimant names this loop in
// claims; claims starting with lostPrefix (this data dir's earlier
// processes) are taken back at once.
func (s *Service) Run(ctx context.Context, claimant, lostPrefix string) {
	s.fanOuts.Run(ctx, claimant, lostPrefix)
}

// fanOutItem does one claimed fan-out: the item's key is the applied run,
// its payload the run's workspace.
func (s *Service) fanOutItem(ctx context.Context, it outbox.Item) (func(outbox.Outcome), error) {
	src, err := s.o.Workspaces.System(ctx, it.Payload)
	if err == nil {
		err = s.fanOut(ctx, it.Key, src)
	}
	if core.KindOf(err) == core.KindNotFound {
		return nil, nil // the workspace is gone: nothing to fan out
	}
	if err != nil && !it.Last && ctx.Err() == nil {
		s.o.Logger.Warn("queueing the dependent runs of an apply failed; retrying", "run", it.Key, "attempt", it.Attempts, "error", err)
	}
	return nil, err
}

// PendingFanOuts counts the fan-outs not yet done, for operators and tests.
func (s *Service) PendingFanOuts(ctx context.Context) (int, error) { return s.fanOuts.Pending(ctx) }

// Wake is the fan-out loop's wake-up (the server announces it to other
// replicas and wakes it when they announce theirs).
func (s *Service) Wake() *loops.Wake { return s.fanOuts.Wake() }

func (s *Service) nudge() { s.fanOuts.Wake().Signal() }

// Outbox is the outbox queue of the fan-outs (the server hooks its metrics on).
func (s *Service) Outbox() *outbox.Queue { return s.fanOuts }
