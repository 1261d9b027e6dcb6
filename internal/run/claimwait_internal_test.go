package run

import (
	"testing"
)

// TestClaimWaitersRouseOneAndPassOn: a queued job rouses one waiting
// claim of each kind, not all of them; the one that takes a job passes a
// wake-up to the next of its kind, the one that finds nothing ends the
// chain; a wake-up that comes during an attempt is kept for another
// attempt; a waiter that leaves with a wake-up passes it on.
func TestClaimWaitersRouseOneAndPassOn(t *testing.T) {
	s := &Service{}
	a1, a2, a3 := s.WaitForClaim(QueueRuns, ""), s.WaitForClaim(QueueRuns, ""), s.WaitForClaim(QueueRuns, "")
	b := s.WaitForClaim(QueueRuns, "apool-1")
	roused := func(ws ...*ClaimWaiter) []bool {
		out := make([]bool, len(ws))
		for i, w := range ws {
			select {
			case <-w.C():
				w.Roused()
				out[i] = true
			default:
			}
		}
		return out
	}
	want := func(step string, got []bool, want ...bool) {
		t.Helper()
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: roused %v, want %v", step, got, want)
			}
		}
	}

	s.rouseWaiters()
	want("a job queued", roused(a1, a2, a3, b), true, false, false, true)
	b.Claimed(false)
	a1.Claimed(true)
	want("the first took the job", roused(a2, a3, b), true, false, false)
	a2.Claimed(false)
	want("the second found nothing", roused(a1, a3, b), false, false, false)

	// Two jobs queued while every waiter idles: two waiters roused.
	s.rouseWaiters()
	s.rouseWaiters()
	want("two jobs queued", roused(a1, a2, a3), true, true, false)
	// A third wake-up comes while both are in their attempts: the third
	// waiter gets it rather than a busy one.
	s.rouseWaiters()
	want("a third job queued", roused(a1, a2, a3), false, false, true)
	a1.Claimed(true)
	a2.Claimed(true)
	a3.Claimed(true)
	// Every waiter took one and passed on; all three wake-ups are pending
	// again (each of them will look once more and end the chain).
	got := roused(a1, a2, a3)
	if n := count(got); n < 2 {
		t.Fatalf("after three jobs taken, %v roused: the chain must go on until an attempt finds nothing", got)
	}
	for _, w := range []*ClaimWaiter{a1, a2, a3} {
		w.Claimed(false)
	}
	want("the queue is empty", roused(a1, a2, a3), false, false, false)

	// A wake-up that arrives during an attempt that then finds nothing
	// is kept: the waiter looks again.
	s.rouseWaiters() // rouses a1 (idle, first in line)
	want("rouse", roused(a1), true)
	s.rouseWaiters() // a1 is in its attempt: a2 gets it
	s.rouseWaiters() // a3
	s.rouseWaiters() // everyone busy: the first one in an attempt, a1, gets one pending
	a1.Claimed(false)
	want("kept during an attempt", roused(a1, a2, a3), true, true, true)
	for _, w := range []*ClaimWaiter{a1, a2, a3} {
		w.Claimed(false)
	}

	// Leaving with a wake-up passes it on.
	s.rouseWaiters()
	a1.Leave()
	want("passed on by a waiter that left", roused(a2, a3), true, false)
	a2.Claimed(false)
	// Leaving while holding one (the attempt failed) passes it on too.
	s.rouseWaiters()
	want("rouse", roused(a2), true)
	a2.Leave()
	want("passed on by a waiter whose attempt failed", roused(a3), true)
	a3.Leave()
	b.Leave()
	if len(s.waiting) != 0 {
		t.Fatalf("waiters left in line: %v", s.waiting)
	}
	s.rouseWaiters() // nobody waits: nothing to do, nothing kept
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
