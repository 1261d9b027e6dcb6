package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestReplicaWithAnotherSecretRefused: a server that would join a live
// replica of its database with another signing secret (so that the URLs
// one signs fail on the other) does not start, says why, and leaves no
// trace; with the shared secret it starts; a replica not seen for longer
// than a replica counts as live no longer holds a changed secret back.
// What is stored names the secret without revealing it.
func TestReplicaWithAnotherSecretRefused(t *testing.T) {
	t.Parallel()
	testenv.ForEachStore(t, func(t *testing.T, a *testenv.Env) {
		ctx := context.Background()
		shared := testenv.ReplicaOf(t, a)
		other := server.Config{DataDir: t.TempDir(), Database: shared.Database, KEK: shared.KEK, Secret: core.RandomString(32), Addr: "127.0.0.1:0"}
		rows := func() int {
			var n int
			if err := a.Server.DB.QueryRow(ctx, `SELECT COUNT(*) FROM replica_presence`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := rows(); n != 1 {
			t.Fatalf("%d replicas recorded with one server running, want 1", n)
		}
		var fp string
		if err := a.Server.DB.QueryRow(ctx, `SELECT secret_fingerprint FROM replica_presence`).Scan(&fp); err != nil {
			t.Fatal(err)
		}
		if fp == "" || strings.Contains(shared.Secret, fp) || strings.Contains(fp, shared.Secret) {
			t.Fatalf("the stored fingerprint %q reveals the secret or is empty", fp)
		}

		if s, err := server.New(ctx, other); err == nil {
			s.Close()
			t.Fatal("a replica with another signing secret started beside a live one")
		} else if !strings.Contains(err.Error(), "another secret") || !strings.Contains(err.Error(), "--secret") {
			t.Fatalf("refused with %q, want an error naming the secret mismatch and --secret", err)
		}
		if n := rows(); n != 1 {
			t.Fatalf("a refused replica left %d presence rows, want the first server's only", n)
		}

		b := testenv.New(t, shared)
		if n := rows(); n != 2 {
			t.Fatalf("%d replicas recorded with two running, want 2", n)
		}
		b.Stop(t)
		if n := rows(); n != 1 {
			t.Fatalf("%d replicas recorded after one stopped, want 1", n)
		}

		// The first server last seen long ago (killed, never back).
		if _, err := a.Server.DB.Exec(ctx, `UPDATE replica_presence SET seen_at = ?`, core.Micros(core.Now().Add(-time.Hour))); err != nil {
			t.Fatal(err)
		}
		s, err := server.New(ctx, other)
		if err != nil {
			t.Fatalf("a replica with a changed secret was held back by one not seen for an hour: %v", err)
		}
		s.Close()
	})
}
