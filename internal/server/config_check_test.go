package server

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// TestJobHeartbeatTimeoutTooShort: a job lease under a second is refused
// at start, saying which flag, before anything is opened or written.
func TestJobHeartbeatTimeoutTooShort(t *testing.T) {
	t.Parallel()
	dir := t.TempDir() + "/data"
	_, err := New(context.Background(), Config{DataDir: dir, JobHeartbeatTimeout: 200 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "--job-heartbeat-timeout") {
		t.Fatalf("a 200ms job lease: err = %v, want a refusal naming --job-heartbeat-timeout", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("the refused server made its data dir (%v)", err)
	}
	cfg := Config{JobHeartbeatTimeout: time.Second}
	cfg.setDefaults()
	if err := cfg.check(); err != nil {
		t.Fatalf("a 1s job lease is refused: %v", err)
	}
}
