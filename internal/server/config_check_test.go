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

// TestSMTPAddrNeedsAPort: --smtp-addr is host:port (the SMTP settings show
// the two apart, and a message could go nowhere else), refused at start
// otherwise.
func TestSMTPAddrNeedsAPort(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"mail.example.com:587": true, "127.0.0.1:25": true, "[::1]:2525": true,
		"mail.example.com": false, "mail.example.com:smtp": false, "mail.example.com:0": false, ":": false} {
		cfg := Config{SMTPAddr: addr}
		cfg.setDefaults()
		err := cfg.check()
		if ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "--smtp-addr")) {
			t.Errorf("--smtp-addr %q: %v", addr, err)
		}
	}
}
