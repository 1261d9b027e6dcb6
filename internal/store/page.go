package store

import (
	"context"
	"strings"
)

// In is the placeholders of an SQL IN list of vals ("?, ?, ?") and the
// arguments that go with them.
func In[T any](vals []T) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = v
	}
	return strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", "), args
}

// Pairs runs a query of two text columns and returns its rows: a child's
// parent and the child, for the lists that read a page's relations in one
// statement and group them by parent.
func Pairs(ctx context.Context, q Q, query string, args ...any) ([][2]string, error) {
	return All(ctx, q, func(s Scanner) (p [2]string, err error) {
		err = s.Scan(&p[0], &p[1])
		return p, err
	}, query, args...)
}

// Page selects at most limit (all when negative) of the rows of
// `SELECT cols FROM from WHERE where ORDER BY order`, from offset on, and
// counts all that where selects: a list's page and its total, from the
// store, for one count and one select whatever the list's length. args
// are where's.
func Page[T any](ctx context.Context, q Q, scan func(Scanner) (T, error), cols, from, where, order string, offset, limit int, args ...any) ([]T, int, error) {
	var total int
	if err := q.QueryRow(ctx, `SELECT COUNT(*) FROM `+from+` WHERE `+where, args...).Scan(&total); err != nil {
		return nil, 0, err
	}
	return PageOf(ctx, q, scan, cols, from, where, order, offset, limit, total, args...)
}

// PageOf is Page for a caller that knows the total (a count the store
// keeps, rather than one of every row where selects).
func PageOf[T any](ctx context.Context, q Q, scan func(Scanner) (T, error), cols, from, where, order string, offset, limit, total int, args ...any) ([]T, int, error) {
	if offset = max(offset, 0); offset >= total || limit == 0 {
		return []T{}, total, nil
	}
	if limit < 0 {
		limit = total
	}
	out, err := All(ctx, q, scan, `SELECT `+cols+` FROM `+from+` WHERE `+where+` ORDER BY `+order+` LIMIT ? OFFSET ?`, append(args[:len(args):len(args)], limit, offset)...)
	if out == nil && err == nil {
		out = []T{}
	}
	return out, total, err
}
