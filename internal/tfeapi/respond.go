package tfeapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/hashicorp/jsonapi"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// ContentType is the JSON:API media type.
const ContentType = "application/vnd.api+json"

// Respond writes v (a pointer to a struct with jsonapi tags) as a JSON:API
// document. Only the objects passed as included appear in "included":
// relationships otherwise carry linkage alone, as HCP Terraform does when no
// include is asked for.
func Respond(w http.ResponseWriter, r *http.Request, status int, v any, included ...any) {
	respond(w, r, status,
		func(b []byte) ([]byte, error) { return appendOne(b, v, included) },
		func() ([]byte, error) { return genericOne(v, included) })
}

// genericOne is Respond's document as hashicorp/jsonapi and encoding/json
// write it.
func genericOne(v any, included []any) ([]byte, error) {
	p, err := jsonapi.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding response: %w", err)
	}
	one, ok := p.(*jsonapi.OnePayload)
	if !ok {
		return nil, fmt.Errorf("encoding response: %T is not a single resource", v)
	}
	inc, err := nodes(included)
	if err != nil {
		return nil, err
	}
	one.Included = inc
	return encodeJSON(one)
}

// Pagination is the page a list response holds.
type Pagination struct {
	Page, Size, Total int
	// EmptyHasNoPages makes an empty list have 0 pages rather than 1, as
	// HCP Terraform's registry-providers lists answer (go-tfe's tests
	// check it there).
	EmptyHasNoPages bool
}

// RespondList writes items (a slice of pointers to jsonapi structs) with
// meta.pagination.
func RespondList(w http.ResponseWriter, r *http.Request, items any, pg Pagination, included ...any) {
	meta := map[string]any{"pagination": pg.meta()}
	respond(w, r, http.StatusOK,
		func(b []byte) ([]byte, error) { return appendMany(b, items, included, meta) },
		func() ([]byte, error) { return genericMany(items, included, meta) })
}

// genericMany is RespondList's document as hashicorp/jsonapi and
// encoding/json write it.
func genericMany(items any, included []any, meta map[string]any) ([]byte, error) {
	many, err := marshalMany(items)
	if err != nil {
		return nil, err
	}
	inc, err := nodes(included)
	if err != nil {
		return nil, err
	}
	many.Included = inc
	m := jsonapi.Meta(meta)
	many.Meta = &m
	return encodeJSON(many)
}

// respond writes the document fast (encode.go) writes, or, when it
// declines, the one generic writes (or generic's error). With the check
// on (CheckEnv) both are written and a difference panics.
func respond(w http.ResponseWriter, r *http.Request, status int, fast func([]byte) ([]byte, error), generic func() ([]byte, error)) {
	buf := docBuffers.Get().(*[]byte)
	defer func() {
		if cap(*buf) <= maxPooledDoc {
			docBuffers.Put(buf)
		}
	}()
	b, err := fast((*buf)[:0])
	if err == nil {
		*buf = b[:0]
		if checkEncoder {
			if want, gerr := generic(); gerr != nil || !bytes.Equal(b, want) {
				// Where, not what: a document can hold a token created
				// just now (tfeapi.CheckEncoding on the model shows both).
				panic(fmt.Sprintf("tfeapi: the JSON:API encoder differs from hashicorp/jsonapi for %s %s: %s",
					r.Method, r.URL.Path, difference(b, want, gerr)))
			}
		}
		RespondBytes(w, status, b)
		return
	}
	doc, err := generic()
	if err != nil {
		Error(w, r, err)
		return
	}
	RespondBytes(w, status, doc)
}

// difference says where two encodings of a document part, without their
// contents.
func difference(got, want []byte, genericErr error) string {
	if genericErr != nil {
		return fmt.Sprintf("hashicorp/jsonapi refused it (%v) where the encoder wrote %d bytes", genericErr, len(got))
	}
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	return fmt.Sprintf("the encoder wrote %d bytes, hashicorp/jsonapi %d; they part at byte %d", len(got), len(want), i)
}

// maxPooledDoc: buffers that grew past it (a long list) are not kept.
const maxPooledDoc = 64 << 10

func (pg Pagination) meta() map[string]any {
	size := max(pg.Size, 1)
	pages := (pg.Total + size - 1) / size
	if !pg.EmptyHasNoPages {
		pages = max(pages, 1)
	}
	m := map[string]any{
		"current-page": pg.Page,
		"page-size":    size,
		"total-pages":  pages,
		"total-count":  pg.Total,
		"prev-page":    nil,
		"next-page":    nil,
	}
	if pg.Page > 1 {
		m["prev-page"] = min(pg.Page-1, pages)
	}
	if pg.Page < pages {
		m["next-page"] = pg.Page + 1
	}
	return m
}

func marshalMany(items any) (*jsonapi.ManyPayload, error) {
	rv := reflect.ValueOf(items)
	if rv.Kind() != reflect.Slice {
		return nil, fmt.Errorf("encoding list: %T is not a slice", items)
	}
	out := &jsonapi.ManyPayload{Data: []*jsonapi.Node{}}
	for i := 0; i < rv.Len(); i++ {
		n, err := node(rv.Index(i).Interface())
		if err != nil {
			return nil, err
		}
		out.Data = append(out.Data, n)
	}
	return out, nil
}

func node(v any) (*jsonapi.Node, error) {
	p, err := jsonapi.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	one, ok := p.(*jsonapi.OnePayload)
	if !ok || one.Data == nil {
		return nil, fmt.Errorf("encoding %T: not a single resource", v)
	}
	return one.Data, nil
}

// nodes encodes included objects; a slice argument contributes each element.
// Duplicates (same type and id) are dropped.
func nodes(included []any) ([]*jsonapi.Node, error) {
	var out []*jsonapi.Node
	seen := map[string]bool{}
	add := func(v any) error {
		if v == nil || (reflect.ValueOf(v).Kind() == reflect.Pointer && reflect.ValueOf(v).IsNil()) {
			return nil
		}
		n, err := node(v)
		if err != nil {
			return err
		}
		if k := n.Type + "/" + n.ID; !seen[k] {
			seen[k] = true
			out = append(out, n)
		}
		return nil
	}
	for _, v := range included {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Slice {
			for i := 0; i < rv.Len(); i++ {
				if err := add(rv.Index(i).Interface()); err != nil {
					return nil, err
				}
			}
			continue
		}
		if err := add(v); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// encodeJSON encodes a payload as json.Encoder does (HTML escaped, a
// newline at the end).
func encodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		return nil, fmt.Errorf("encoding response: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteJSON writes v as plain JSON with the given content type.
func WriteJSON(w http.ResponseWriter, status int, contentType string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encoding response", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// ErrorObject is one entry of a JSON:API errors array.
type ErrorObject struct {
	Status string `json:"status"`
	Title  string `json:"title"`
	Detail string `json:"detail,omitempty"`
}

var kindStatus = map[core.Kind]int{
	core.KindInternal:        http.StatusInternalServerError,
	core.KindNotFound:        http.StatusNotFound,
	core.KindConflict:        http.StatusConflict,
	core.KindInvalid:         http.StatusUnprocessableEntity,
	core.KindBadRequest:      http.StatusBadRequest,
	core.KindUnauthorized:    http.StatusUnauthorized,
	core.KindForbidden:       http.StatusForbidden,
	core.KindTooLarge:        http.StatusRequestEntityTooLarge,
	core.KindTooManyRequests: http.StatusTooManyRequests,
}

var kindTitle = map[core.Kind]string{
	core.KindInternal:        "internal server error",
	core.KindNotFound:        "not found",
	core.KindConflict:        "conflict",
	core.KindInvalid:         "invalid attribute",
	core.KindBadRequest:      "bad request",
	core.KindUnauthorized:    "unauthorized",
	core.KindForbidden:       "forbidden",
	core.KindTooLarge:        "request entity too large",
	core.KindTooManyRequests: "too many requests",
}

// Error writes err as a JSON:API error document. The status comes from the
// error's kind; internal errors are logged here (and only here) and their
// text is not shown to the caller.
func Error(w http.ResponseWriter, r *http.Request, err error) {
	err = AsAnswered(err)
	kind := core.KindOf(err)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		kind = core.KindTooLarge
		err = &core.Error{Kind: kind, Detail: fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit)}
	}
	status := kindStatus[kind]
	obj := ErrorObject{Status: strconv.Itoa(status), Title: kindTitle[kind]}
	var ce *core.Error
	if errors.As(err, &ce) && ce.Title != "" {
		obj.Title = ce.Title
	}
	if kind == core.KindInternal {
		if ctxErr := r.Context().Err(); ctxErr != nil && errors.Is(err, ctxErr) {
			// The caller went away, or the server is stopping: no one
			// reads the answer and nothing failed on this side (the
			// request's transactions rolled back).
			slog.DebugContext(r.Context(), "request abandoned", "method", r.Method, "path", r.URL.Path, "error", err)
		} else {
			slog.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "error", err)
		}
	} else if ce != nil {
		obj.Detail = ce.Detail
		if obj.Detail == "" {
			obj.Detail = err.Error()
		}
	} else {
		obj.Detail = err.Error()
	}
	objs := []ErrorObject{obj}
	if several := refusals(err, kind); several != nil {
		// Several refusals of one request (invalid attributes): one
		// error object each, as HCP Terraform answers them.
		objs = objs[:0]
		for _, ce := range several {
			o := ErrorObject{Status: strconv.Itoa(status), Title: kindTitle[kind], Detail: ce.Error()}
			if ce.Title != "" {
				o.Title = ce.Title
			}
			objs = append(objs, o)
		}
	}
	WriteJSON(w, status, ContentType, map[string]any{"errors": objs})
}

// refusals returns the errors err joins (errors.Join) when every one is a
// *core.Error of kind, not internal; nil otherwise.
func refusals(err error, kind core.Kind) []*core.Error {
	multi, ok := err.(interface{ Unwrap() []error })
	if !ok || kind == core.KindInternal {
		return nil
	}
	var out []*core.Error
	for _, e := range multi.Unwrap() {
		ce, ok := e.(*core.Error)
		if !ok || ce.Kind != kind {
			return nil
		}
		out = append(out, ce)
	}
	return out
}

// NotFound answers any unknown API route.
func NotFound(w http.ResponseWriter, r *http.Request) {
	Error(w, r, core.NotFound("no such route: %s %s", r.Method, r.URL.Path))
}

// Includes parses the include query parameter (comma-separated; hyphens and
// underscores are interchangeable) and refuses names outside allowed with
// the 400 "Invalid include parameter" that go-tfe recognises.
func Includes(r *http.Request, allowed ...string) (map[string]bool, error) {
	raw := r.URL.Query().Get("include")
	out := map[string]bool{}
	if raw == "" {
		return out, nil
	}
	ok := map[string]bool{}
	for _, a := range allowed {
		ok[normInclude(a)] = true
	}
	for _, part := range strings.Split(raw, ",") {
		name := normInclude(strings.TrimSpace(part))
		if name == "" {
			continue
		}
		if !ok[name] {
			return nil, &core.Error{Kind: core.KindBadRequest, Title: "Invalid include parameter", Detail: fmt.Sprintf("Invalid include parameter: %q is not one of %s", part, strings.Join(allowed, ", "))}
		}
		out[name] = true
	}
	return out, nil
}

func normInclude(s string) string { return strings.ReplaceAll(s, "-", "_") }

// AsAnswered is err as a caller is answered with it, the API's and the
// UI's: a database's refusal of a text from the request that no store
// call turned into store.ErrBadText (a row of a Query read after its
// first) is that bad input, as a write's or a single-row read's is.
func AsAnswered(err error) error {
	if core.KindOf(err) == core.KindInternal && store.IsBadText(err) {
		return store.ErrBadText
	}
	return err
}

// Status returns the HTTP status and title err maps to (the table Error
// uses), for responses that are not JSON:API documents (the web pages).
func Status(err error) (int, string) {
	kind := core.KindOf(err)
	var ce *core.Error
	if errors.As(err, &ce) && ce.Title != "" {
		return kindStatus[kind], ce.Title
	}
	return kindStatus[kind], kindTitle[kind]
}
