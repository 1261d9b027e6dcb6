package moduletest_test

import (
	"context"
	"testing"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/internal/testenv"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestIdleClaimDoesNotWrite: an agent's claim that finds no queued test
// run for its pool (the common case: an idle agent asks at every claim)
// reads, and does not take the store's writer. The request memo, which a
// write makes forget, tells.
func TestIdleClaimDoesNotWrite(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := core.WithMemo(context.Background())
		tr, err := e.Server.ModuleTests.ClaimForAgent(ctx, "agent-idle", "apool-idle")
		if err != nil || tr != nil {
			t.Fatalf("claiming with nothing queued: %v, %v; want nothing", tr, err)
		}
		if !core.HasMemo(ctx) {
			t.Error("an idle claim wrote to the store")
		}
	})
}
