package ui

import (
	"math"
	"net/url"
	"strconv"
)

// pageSize is how many items a page of a list (workspaces, policy sets)
// shows.
const pageSize = 50

// pager is where a list's page stands: Page is 1-based; Prev and Next are
// the neighbouring pages' query strings ("" when there is none).
type pager struct {
	Total, Page int
	Prev, Next  string
}

// listPage reads the page of a list the query q asks for (its "page",
// clamped) with list, given an offset and a limit; a page past the last
// shows the last. It returns the page's items and where the page stands,
// with links that keep q's other parameters.
func listPage[T any](q url.Values, list func(offset, limit int) ([]T, int, error)) ([]T, pager, error) {
	var p pager
	p.Page, _ = strconv.Atoi(q.Get("page"))
	p.Page = min(max(p.Page, 1), math.MaxInt32/pageSize)
	items, total, err := list((p.Page-1)*pageSize, pageSize)
	if err == nil && len(items) == 0 && total > 0 {
		p.Page = (total + pageSize - 1) / pageSize
		items, total, err = list((p.Page-1)*pageSize, pageSize)
	}
	if err != nil {
		return nil, p, err
	}
	p.Total = total
	links := url.Values{}
	for k, v := range q {
		links[k] = v
	}
	if p.Page > 1 {
		links.Set("page", strconv.Itoa(p.Page-1))
		p.Prev = "?" + links.Encode()
	}
	if p.Page < max((total+pageSize-1)/pageSize, 1) {
		links.Set("page", strconv.Itoa(p.Page+1))
		p.Next = "?" + links.Encode()
	}
	return items, p, nil
}
