package agent_test

import (
	"testing"

	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestMain stops the PostgreSQL server the tests shared (left running
// otherwise: one more orphan server per test run).
func TestMain(m *testing.M) { storetest.Main(m) }
