package httplimit

import (
	"testing"
	"time"
)

// TestAttemptLimiter: n attempts may be spent at once, the next is refused
// with the wait until one is back, and keys do not share buckets.
func TestAttemptLimiter(t *testing.T) {
	t.Parallel()
	l := NewAttemptLimiter(3, 5*time.Minute)
	for i := range 3 {
		if ok, _ := l.Allow("alice"); !ok {
			t.Fatalf("attempt %d refused", i+1)
		}
	}
	ok, wait := l.Allow("alice")
	if ok || wait <= 0 {
		t.Fatalf("the fourth attempt: allowed=%v wait=%v, want refused with a wait", ok, wait)
	}
	if ok, _ := l.Allow("bob"); !ok {
		t.Fatal("another key was refused")
	}
	if l.Rejected() != 1 {
		t.Fatalf("rejected %d, want 1", l.Rejected())
	}
}
