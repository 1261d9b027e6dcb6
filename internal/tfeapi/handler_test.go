package tfeapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

func TestHandleWritesTheReturnedError(t *testing.T) {
	t.Parallel()
	h := Handle(func(w http.ResponseWriter, r *http.Request) error {
		return core.Invalid("name %q is taken", "x")
	})
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("GET", "/api/v2/x", nil))
	if rec.Code != http.StatusUnprocessableEntity {
		t.Fatalf("status %d, want 422", rec.Code)
	}
	var doc struct {
		Errors []ErrorObject `json:"errors"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Errors) != 1 {
		t.Fatalf("body %s: %v", rec.Body, err)
	}
	if doc.Errors[0].Detail != `name "x" is taken` {
		t.Fatalf("detail %q", doc.Errors[0].Detail)
	}
}

func TestHandleLeavesASuccessAlone(t *testing.T) {
	t.Parallel()
	h := Handle(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusNoContent)
		return nil
	})
	rec := httptest.NewRecorder()
	h(rec, httptest.NewRequest("DELETE", "/api/v2/x", nil))
	if rec.Code != http.StatusNoContent || rec.Body.Len() != 0 {
		t.Fatalf("status %d body %q", rec.Code, rec.Body)
	}
}

func TestDecodeAttrs(t *testing.T) {
	t.Parallel()
	type attrs struct {
		Name *string `json:"name"`
	}
	body := `{"data":{"type":"things","attributes":{"name":"a"},"relationships":{"team":{"data":{"type":"teams","id":"team-1"}}}}}`
	doc, got, err := DecodeAttrs[attrs](httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(body)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name == nil || *got.Name != "a" {
		t.Fatalf("name %v", got.Name)
	}
	if id, _ := doc.RelID("team"); id != "team-1" {
		t.Fatalf("team %q", id)
	}
	_, _, err = DecodeAttrs[attrs](httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(`{"data":{"attributes":{"name":7}}}`)), 0)
	if core.KindOf(err) == core.KindInternal || err == nil {
		t.Fatalf("a wrong attribute type must be a client error, got %v", err)
	}
	_, _, err = DecodeAttrs[attrs](httptest.NewRecorder(), httptest.NewRequest("POST", "/", strings.NewReader(body)), 10)
	if core.KindOf(err) != core.KindTooLarge {
		t.Fatalf("over the limit: %v", err)
	}
}

func TestListPage(t *testing.T) {
	t.Parallel()
	type item struct {
		ID string `jsonapi:"primary,items"`
	}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/?page[number]=2&page[size]=2", nil)
	err := ListPage(rec, r, func() ([]string, error) { return []string{"a", "b", "c"}, nil },
		func(s string) *item { return &item{ID: s} })
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		Meta struct {
			Pagination struct {
				TotalCount int `json:"total-count"`
			} `json:"pagination"`
		} `json:"meta"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Data) != 1 || doc.Data[0].ID != "c" || doc.Meta.Pagination.TotalCount != 3 {
		t.Fatalf("page 2 of 3 items by 2: %s", rec.Body)
	}
	if err := ListPage(httptest.NewRecorder(), httptest.NewRequest("GET", "/?page[size]=x", nil),
		func() ([]string, error) { return nil, nil }, func(s string) *item { return nil }); err == nil {
		t.Fatal("a bad page size must be an error")
	}
}
