package tfeapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/terracehq/terrace/internal/core"
)

// DefaultBodyLimit bounds API request bodies unless a route sets its own.
const DefaultBodyLimit = 5 << 20

// Document is a decoded JSON:API request document, kept loose: type may be
// empty, relationships may carry whole objects, and action endpoints may
// send plain JSON (then Attributes holds the whole body).
type Document struct {
	Type          string
	ID            string
	Attributes    json.RawMessage
	Relationships map[string]Relationship
}

// Relationship is a relationship as sent: data is an object, an array or null.
type Relationship struct {
	Data json.RawMessage `json:"data"`
}

// Resource is one element of relationship data.
type Resource struct {
	Type       string          `json:"type"`
	ID         string          `json:"id"`
	Attributes json.RawMessage `json:"attributes"`
}

// Decode reads a request body of at most limit bytes (0 means
// DefaultBodyLimit). An empty body decodes to an empty document.
func Decode(w http.ResponseWriter, r *http.Request, limit int64) (*Document, error) {
	if limit == 0 {
		limit = DefaultBodyLimit
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("request body is larger than the limit of %d bytes", limit)}
		}
		return nil, core.BadRequest("reading request body: %v", err)
	}
	return DecodeBytes(body)
}

// DecodeBytes parses a request body (see Decode).
func DecodeBytes(body []byte) (*Document, error) {
	doc := &Document{Relationships: map[string]Relationship{}}
	if len(strings.TrimSpace(string(body))) == 0 {
		doc.Attributes = json.RawMessage("{}")
		return doc, nil
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, core.BadRequest("request body is not a JSON object: %v", jsonErr(err))
	}
	raw, ok := top["data"]
	if !ok {
		// Plain JSON body (action endpoints): treat it as the attributes.
		doc.Attributes = body
		return doc, nil
	}
	var data struct {
		Type          string                     `json:"type"`
		ID            json.RawMessage            `json:"id"`
		Attributes    json.RawMessage            `json:"attributes"`
		Relationships map[string]json.RawMessage `json:"relationships"`
	}
	if err := json.Unmarshal(raw, &data); err != nil {
		return nil, core.BadRequest("\"data\" must be a JSON:API resource object: %v", jsonErr(err))
	}
	doc.Type = data.Type
	if len(data.ID) > 0 && string(data.ID) != "null" {
		var id string
		if err := json.Unmarshal(data.ID, &id); err != nil {
			return nil, core.BadRequest("\"data.id\" must be a string")
		}
		doc.ID = id
	}
	doc.Attributes = data.Attributes
	if len(doc.Attributes) == 0 || string(doc.Attributes) == "null" {
		doc.Attributes = json.RawMessage("{}")
	}
	for name, rr := range data.Relationships {
		var rel Relationship
		if err := json.Unmarshal(rr, &rel); err != nil {
			return nil, core.BadRequest("relationship %q must be an object with \"data\": %v", name, jsonErr(err))
		}
		doc.Relationships[name] = rel
	}
	return doc, nil
}

// Attrs decodes the attributes into dst, a struct with json tags (use
// pointers to tell absent from zero). A value of the wrong type is a 422
// naming the attribute.
func (d *Document) Attrs(dst any) error {
	if err := json.Unmarshal(d.Attributes, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return core.Invalid("attribute %q must be of type %s, not %s", attrName(te.Field), te.Type.String(), te.Value)
		}
		return core.BadRequest("attributes must be a JSON object: %v", jsonErr(err))
	}
	return nil
}

// RelID returns the id of a to-one relationship, "" when absent or null.
func (d *Document) RelID(name string) (string, error) {
	rel, ok := d.Relationships[name]
	if !ok || len(rel.Data) == 0 || string(rel.Data) == "null" {
		return "", nil
	}
	var res Resource
	if err := json.Unmarshal(rel.Data, &res); err != nil {
		return "", core.BadRequest("relationship %q must hold one resource identifier: %v", name, jsonErr(err))
	}
	return res.ID, nil
}

// RelResources returns the elements of a to-many relationship.
func (d *Document) RelResources(name string) ([]Resource, error) {
	rel, ok := d.Relationships[name]
	if !ok || len(rel.Data) == 0 || string(rel.Data) == "null" {
		return nil, nil
	}
	var res []Resource
	if err := json.Unmarshal(rel.Data, &res); err != nil {
		return nil, core.BadRequest("relationship %q must hold an array of resources: %v", name, jsonErr(err))
	}
	return res, nil
}

// DecodeResources parses a body whose data is an array of resources (the
// relationship endpoints: remote-state consumers, tags, team members, …).
func DecodeResources(w http.ResponseWriter, r *http.Request) ([]Resource, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DefaultBodyLimit))
	if err != nil {
		return nil, core.BadRequest("reading request body: %v", err)
	}
	var top struct {
		Data []Resource `json:"data"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, core.BadRequest("\"data\" must be an array of resources: %v", jsonErr(err))
	}
	return top.Data, nil
}

// DecodeData parses a body whose data is plain JSON rather than JSON:API
// resources ({"data": [{"tag-key": …}]}, policy set tag selectors) into
// dst. Absent or null data is a 422, as is a value of the wrong type
// (naming the field); a body that is not JSON is a 400.
func DecodeData(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, DefaultBodyLimit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return &core.Error{Kind: core.KindTooLarge, Detail: fmt.Sprintf("request body is larger than the limit of %d bytes", int64(DefaultBodyLimit))}
		}
		return core.BadRequest("reading request body: %v", err)
	}
	var top struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &top); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return core.Invalid("the request body must be a JSON object with \"data\"")
		}
		return core.BadRequest("request body is not JSON: %v", jsonErr(err))
	}
	if len(top.Data) == 0 || string(top.Data) == "null" {
		return core.Invalid("\"data\" is required")
	}
	if err := json.Unmarshal(top.Data, dst); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			where := "data"
			if te.Field != "" {
				where += "." + te.Field
			}
			return core.Invalid("%s must be of type %s, not %s", where, jsonType(te.Type), te.Value)
		}
		return core.Invalid("\"data\" is not what this endpoint takes: %v", jsonErr(err))
	}
	return nil
}

// jsonType names a Go type as JSON would.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return "number"
	}
	return t.String()
}

func jsonErr(err error) string {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Sprintf("%v (at byte %d)", se, se.Offset)
	}
	return err.Error()
}

// Page is the requested page of a list.
type Page struct {
	Number, Size int
}

// Offset is the number of items before the page.
func (p Page) Offset() int { return (p.Number - 1) * p.Size }

// ParsePage reads page[number] (default 1) and page[size] (default 20, at
// most 100). A non-numeric value is a 400.
func ParsePage(r *http.Request) (Page, error) {
	p := Page{Number: 1, Size: 20}
	q := r.URL.Query()
	if v := q.Get("page[number]"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, core.BadRequest("page[number] must be a positive integer, not %q", v)
		}
		p.Number = n
	}
	if v := q.Get("page[size]"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return p, core.BadRequest("page[size] must be a positive integer, not %q", v)
		}
		p.Size = min(n, 100)
	}
	return p, nil
}

// Paginate slices items for page p and returns the slice and the pagination meta.
func Paginate[T any](items []T, p Page) ([]T, Pagination) {
	pg := Pagination{Page: p.Number, Size: p.Size, Total: len(items)}
	start := min(p.Offset(), len(items))
	end := min(start+p.Size, len(items))
	return items[start:end], pg
}

// attrName drops the Go struct names encoding/json puts before an embedded
// field ("UpdateOptions.name" becomes "name").
func attrName(field string) string {
	parts := strings.Split(field, ".")
	for len(parts) > 1 && parts[0] != "" && parts[0][0] >= 'A' && parts[0][0] <= 'Z' {
		parts = parts[1:]
	}
	return strings.Join(parts, ".")
}
