package outbox

import (
	"context"
	"testing"
	"time"
)

func TestBackoffDoublesUpToTheCap(t *testing.T) {
	q := &Queue{o: Options{Backoff: time.Second, MaxBackoff: 10 * time.Second}}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if got := q.backoff(i + 1); got != w {
			t.Errorf("backoff after attempt %d = %s, want %s", i+1, got, w)
		}
	}
	if got := q.backoff(1000); got != 10*time.Second {
		t.Errorf("backoff after many attempts = %s", got)
	}
}

func TestMoveRefusesWhatTheTableLacks(t *testing.T) {
	for _, m := range [][2]Status{{Failed, Pending}, {Pending, Failed}, {Pending, Pending}, {Failed, Claimed}} {
		if _, err := move(context.Background(), nil, "t", "k", m[0], m[1], "", -1, ""); err == nil {
			t.Errorf("an item went from %s to %s", m[0], m[1])
		}
	}
}

func TestNewRefusesWhatItNeeds(t *testing.T) {
	if _, err := New(Options{Topic: "t", Handle: func(context.Context, Item) (func(Outcome), error) { return nil, nil }}); err == nil {
		t.Fatal("a queue without a database")
	}
}
