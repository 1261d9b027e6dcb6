package run

import "sync"

// Long-polling claims wait here for a job to be queued. A wake-up rouses
// one waiter of each kind (queue and agent pool), not all of them: on
// PostgreSQL every roused claim is a transaction, and the three or four
// idle runners that lost the race for one job used to spend those on the
// cores the job's terraform needed. A roused waiter that takes a job
// passes the wake-up on to the next waiter of its kind (more jobs may have
// been queued than wake-ups sent: one write can queue several, and
// replicas announce their jobs once); one that leaves without claiming
// passes it on too. So the chain ends at a claim that finds nothing, and
// no job waits for a runner that sleeps while others are roused.

// claimKind is what a waiter claims from.
type claimKind struct {
	queue Queue
	pool  string
}

// ClaimWaiter is one long-polling claim's place in line.
type ClaimWaiter struct {
	s    *Service
	kind claimKind
	c    chan struct{} // a wake-up, buffered
	// Under s.waitMu: pending, a wake-up sent and not yet received;
	// holding, one received and not yet used by a claim attempt.
	pending, holding, gone bool
}

type claimWaiters struct {
	waitMu  sync.Mutex
	waiting map[claimKind][]*ClaimWaiter
}

// WaitForClaim puts a long-polling claim in line before its first claim
// attempt (a job queued in between rouses it). The caller waits on C,
// calls Roused when it receives, Claimed after each attempt and Leave
// when it stops waiting.
func (s *Service) WaitForClaim(queue Queue, pool string) *ClaimWaiter {
	w := &ClaimWaiter{s: s, kind: claimKind{queue, pool}, c: make(chan struct{}, 1)}
	s.waitMu.Lock()
	if s.waiting == nil {
		s.waiting = map[claimKind][]*ClaimWaiter{}
	}
	s.waiting[w.kind] = append(s.waiting[w.kind], w)
	s.waitMu.Unlock()
	return w
}

// C receives when the waiter is roused.
func (w *ClaimWaiter) C() <-chan struct{} { return w.c }

// Roused records that the waiter received a wake-up from C: its next
// claim attempt uses it.
func (w *ClaimWaiter) Roused() {
	w.s.waitMu.Lock()
	w.pending, w.holding = false, true
	w.s.waitMu.Unlock()
}

// Claimed records a claim attempt's outcome. A waiter roused for it that
// took a job passes a wake-up on to the next of its kind (more may be
// queued); one that found nothing ends the chain (the queue was empty when
// it looked: a job queued later sends its own wake-up, which a waiter
// still in its attempt keeps pending and claims again for).
func (w *ClaimWaiter) Claimed(took bool) {
	s := w.s
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if took && w.holding {
		s.rouseLocked(w.kind, w)
	}
	w.holding = false
}

// Leave takes the waiter out of line; a wake-up it held and did not use
// goes to the next waiter of its kind.
func (w *ClaimWaiter) Leave() {
	s := w.s
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	if w.gone {
		return
	}
	w.gone = true
	line := s.waiting[w.kind]
	for i, o := range line {
		if o == w {
			line = append(line[:i:i], line[i+1:]...)
			break
		}
	}
	if len(line) == 0 {
		delete(s.waiting, w.kind)
	} else {
		s.waiting[w.kind] = line
	}
	if w.pending || w.holding {
		w.pending, w.holding = false, false
		s.rouseLocked(w.kind, nil)
	}
}

// rouseWaiters rouses one waiter of every kind.
func (s *Service) rouseWaiters() {
	s.waitMu.Lock()
	defer s.waitMu.Unlock()
	for kind := range s.waiting {
		s.rouseLocked(kind, nil)
	}
}

// rouseLocked sends a wake-up to the first waiter of kind (other than
// skip) without one pending, preferring one that is not in a claim
// attempt of its own. When every waiter has one pending, they will all
// claim again, and nothing more is needed.
func (s *Service) rouseLocked(kind claimKind, skip *ClaimWaiter) {
	var pick *ClaimWaiter
	for _, w := range s.waiting[kind] {
		if w == skip || w.pending {
			continue
		}
		if !w.holding {
			pick = w
			break
		}
		if pick == nil {
			pick = w
		}
	}
	if pick == nil {
		return
	}
	pick.pending = true
	select {
	case pick.c <- struct{}{}:
	default:
	}
}
