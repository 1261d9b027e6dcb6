package store_test

import (
	"testing"

	"github.com/terracehq/terrace/internal/store/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func TestSQLite(t *testing.T) { storetest.Exercise(t, storetest.SQLiteDSN) }

func TestPostgres(t *testing.T) { storetest.Exercise(t, storetest.PostgresDSN) }
