package auth_test

import (
	"context"
	"sync"
	"testing"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// Replicas starting at the same moment each set up the site admin with the
// same site token: every one of them starts, and there is one admin with
// one token.
func TestEnsureSiteAdminConcurrently(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		const replicas = 8
		secret := "concurrent.atlasv1.site-token-secret"
		ids := make([]string, replicas)
		errs := make([]error, replicas)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range replicas {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				u, err := auth.NewService(db, nil, nil, nil).EnsureSiteAdmin(ctx, secret)
				errs[i] = err
				if u != nil {
					ids[i] = u.ID
				}
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("replica %d: %v", i, err)
			}
			if ids[i] != ids[0] {
				t.Fatalf("replica %d got admin %s, replica 0 got %s", i, ids[i], ids[0])
			}
		}
		var users, tokens int
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM users WHERE username = 'admin'`).Scan(&users); err != nil {
			t.Fatal(err)
		}
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM tokens WHERE hash = ?`, auth.HashToken(secret)).Scan(&tokens); err != nil {
			t.Fatal(err)
		}
		if users != 1 || tokens != 1 {
			t.Fatalf("%d admin users and %d site tokens, want one of each", users, tokens)
		}
		// A later restart finds both and adds nothing.
		if _, err := auth.NewService(db, nil, nil, nil).EnsureSiteAdmin(ctx, secret); err != nil {
			t.Fatalf("a restart: %v", err)
		}
		if err := db.QueryRow(ctx, `SELECT COUNT(*) FROM tokens`).Scan(&tokens); err != nil || tokens != 1 {
			t.Fatalf("after a restart: %d tokens (%v), want 1", tokens, err)
		}
	})
}
