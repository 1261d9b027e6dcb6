package run

import (
	"strings"
	"testing"
)

// TestQueueStatusLists: the SQL status lists the queue queries use agree
// with the Go state machine for every status the table names.
func TestQueueStatusLists(t *testing.T) {
	t.Parallel()
	all := map[Status]bool{}
	for from, tos := range transitions {
		all[from] = true
		for _, to := range tos {
			all[to] = true
		}
	}
	for s := range all {
		quoted := "'" + string(s) + "'"
		if got := strings.Contains(notHolding, quoted); got == s.HoldsWorkspace() {
			t.Errorf("%s: in notHolding %v, HoldsWorkspace %v", s, got, s.HoldsWorkspace())
		}
		wantAhead := !s.Final() && s != PlannedAndSaved
		if got := strings.Contains(notAhead, quoted); got == wantAhead {
			t.Errorf("%s: in notAhead %v, counts in the queue %v", s, got, wantAhead)
		}
	}
	for _, s := range []Status{Applied, PlannedAndFinished, PolicySoftFailed, Discarded, Errored, Canceled, ForceCanceled} {
		if !strings.Contains(notAhead, "'"+string(s)+"'") {
			t.Errorf("final status %s is missing from the lists", s)
		}
	}
}
