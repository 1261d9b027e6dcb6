package tfeapi

import "net/http"

// HandlerFunc is an API handler that returns its failure instead of writing
// it: Handle turns it into an http.HandlerFunc that writes the error as a
// JSON:API error document (see Error). A handler that has already written a
// response returns nil.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// Handle adapts h to net/http.
func Handle(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			Error(w, r, err)
		}
	}
}

// DecodeAttrs reads a JSON:API request body (at most limit bytes, 0 for
// DefaultBodyLimit) and decodes its attributes into a T.
func DecodeAttrs[T any](w http.ResponseWriter, r *http.Request, limit int64) (*Document, T, error) {
	var attrs T
	doc, err := Decode(w, r, limit)
	if err != nil {
		return nil, attrs, err
	}
	if err := doc.Attrs(&attrs); err != nil {
		return nil, attrs, err
	}
	return doc, attrs, nil
}

// ListPage answers a list request: it parses the page parameters, calls
// list for every item, pages them and renders each page item with render.
func ListPage[T, J any](w http.ResponseWriter, r *http.Request, list func() ([]T, error), render func(T) J) error {
	page, err := ParsePage(r)
	if err != nil {
		return err
	}
	all, err := list()
	if err != nil {
		return err
	}
	items, pg := Paginate(all, page)
	out := make([]J, len(items))
	for i, it := range items {
		out[i] = render(it)
	}
	RespondList(w, r, out, pg)
	return nil
}

// StorePage answers a list request whose page the store selects: it
// parses the page parameters, asks list for the page's items (offset and
// limit) and how many there are in all, and renders each with render.
func StorePage[T, J any](w http.ResponseWriter, r *http.Request, list func(offset, limit int) ([]T, int, error), render func(T) J) error {
	page, err := ParsePage(r)
	if err != nil {
		return err
	}
	items, total, err := list(page.Offset(), page.Size)
	if err != nil {
		return err
	}
	out := make([]J, len(items))
	for i, it := range items {
		out[i] = render(it)
	}
	RespondList(w, r, out, Pagination{Page: page.Number, Size: page.Size, Total: total})
	return nil
}

// Reply answers with a result and its error: called with what a service
// returned, it writes the error (see Error) or the document encode makes
// of the result, with status:
//
//	tfeapi.Reply(w, r, http.StatusOK, toJSON)(a.Service.Get(ctx, id))
func Reply[T, D any](w http.ResponseWriter, r *http.Request, status int, encode func(T) D) func(T, error) {
	return func(v T, err error) {
		if err != nil {
			Error(w, r, err)
			return
		}
		Respond(w, r, status, encode(v))
	}
}

// NoContent answers 204 No Content, or err.
func NoContent(w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
