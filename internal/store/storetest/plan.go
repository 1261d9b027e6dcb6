package storetest

import (
	"context"
	"fmt"
	"strings"

	"github.com/terracehq/terrace/internal/store"
)

// QueryPlan returns the plan the store's own planner makes for query, one
// line per step (SQLite's EXPLAIN QUERY PLAN details, PostgreSQL's EXPLAIN
// lines), for a test that pins which index a query uses.
func QueryPlan(ctx context.Context, q store.Q, query string, args ...any) (string, error) {
	explain := `EXPLAIN QUERY PLAN `
	if q.Driver().Name() == "postgres" {
		explain = `EXPLAIN `
	}
	rows, err := q.Query(ctx, explain+query, args...)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return "", err
	}
	var plan []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return "", err
		}
		plan = append(plan, fmt.Sprint(vals[len(vals)-1]))
	}
	return strings.Join(plan, "\n"), rows.Err()
}
