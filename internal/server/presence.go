package server

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// Replicas of one database must share the signing secret (--secret): a
// capability URL signed by one is checked by whichever answers it. Each
// replica records the fingerprint of its secret with a heartbeat, and a
// replica whose secret differs from a live one's refuses to start, rather
// than serve upload and download URLs that fail at random.
const (
	presenceBeat = 30 * time.Second
	// presenceLive is how long a replica counts as live after its last
	// beat: long enough for missed beats, short enough that a replica
	// stopped without saying so (killed) blocks a changed secret only
	// briefly.
	presenceLive = 4 * presenceBeat
)

// secretFingerprint names a signing secret without revealing it: an HMAC
// of a fixed label under the secret.
func secretFingerprint(secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte("terrace signing-secret fingerprint v1"))
	return hex.EncodeToString(m.Sum(nil))[:32]
}

// checkPresence records this replica and its secret's fingerprint, and
// fails when a live replica of the same database signs with another secret.
func (s *Server) checkPresence(ctx context.Context, secret []byte) error {
	fp := secretFingerprint(secret)
	now := core.Now()
	var other string
	err := s.DB.QueryRow(ctx, `SELECT replica FROM replica_presence WHERE replica <> ? AND secret_fingerprint <> ? AND seen_at > ? ORDER BY seen_at DESC LIMIT 1`,
		s.Replica, fp, core.Micros(now.Add(-presenceLive))).Scan(&other)
	switch {
	case err == nil:
		return fmt.Errorf("replica %s of this database signs URLs with another secret than this server's: start every replica with the same --secret (TERRACE_SECRET, or the same <data-dir>/secret file); "+
			"to change the secret, stop every replica first (a replica stopped without shutting down counts as live for %s after its last heartbeat)", other, presenceLive)
	case !store.IsNoRows(err):
		return fmt.Errorf("reading the replicas of this database: %w", err)
	}
	s.presence = fp
	return s.beat(ctx)
}

// beat says this replica is alive.
func (s *Server) beat(ctx context.Context) error {
	_, err := s.DB.Exec(ctx, `INSERT INTO replica_presence (replica, secret_fingerprint, seen_at) VALUES (?, ?, ?)
		ON CONFLICT (replica) DO UPDATE SET secret_fingerprint = excluded.secret_fingerprint, seen_at = excluded.seen_at`,
		s.Replica, s.presence, core.Micros(core.Now()))
	return err
}

// keepPresence beats until ctx ends (Close removes the row).
func (s *Server) keepPresence(ctx context.Context) {
	t := time.NewTicker(presenceBeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.beat(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("recording this replica's presence", "error", err)
			}
		}
	}
}

// leave removes this replica's presence when the server is closed, so
// that a restart with a changed secret is not held up by its own past.
func (s *Server) leave() {
	if s.presence == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.DB.Exec(ctx, `DELETE FROM replica_presence WHERE replica = ?`, s.Replica); err != nil {
		s.logger.Warn("removing this replica's presence", "error", err)
	}
}
