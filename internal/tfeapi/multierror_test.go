package tfeapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

// TestSeveralRefusalsAreSeveralErrors: joined invalid-attribute errors are
// answered as one error object each (go-tfe joins them with newlines, as
// HCP Terraform sends them); an internal error among several stays hidden.
func TestSeveralRefusalsAreSeveralErrors(t *testing.T) {
	w := httptest.NewRecorder()
	Error(w, httptest.NewRequest(http.MethodPost, "/api/v2/x", nil), errors.Join(core.Invalid("Registry name can't be blank"), core.Invalid("Registry name is not included in the list")))
	var doc struct {
		Errors []ErrorObject `json:"errors"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusUnprocessableEntity || len(doc.Errors) != 2 || doc.Errors[0].Detail != "Registry name can't be blank" ||
		doc.Errors[1].Title != "invalid attribute" || doc.Errors[1].Detail != "Registry name is not included in the list" {
		t.Fatalf("answer %d %s", w.Code, w.Body.String())
	}
	w = httptest.NewRecorder()
	Error(w, httptest.NewRequest(http.MethodPost, "/api/v2/x", nil), errors.Join(core.Invalid("name is required"), errors.New("disk full")))
	if body := w.Body.String(); strings.Contains(body, "disk full") {
		t.Fatalf("an internal error was shown: %s", body)
	}
}

// TestEmptyHasNoPages: a list that asks for it counts 0 pages when empty;
// others count 1, as before.
func TestEmptyHasNoPages(t *testing.T) {
	if got := (Pagination{Page: 1, Size: 20}).meta()["total-pages"]; got != 1 {
		t.Fatalf("empty list: %v pages, want 1", got)
	}
	if got := (Pagination{Page: 1, Size: 20, EmptyHasNoPages: true}).meta()["total-pages"]; got != 0 {
		t.Fatalf("empty registry list: %v pages, want 0", got)
	}
	if got := (Pagination{Page: 1, Size: 20, Total: 21, EmptyHasNoPages: true}).meta()["total-pages"]; got != 2 {
		t.Fatalf("21 items: %v pages, want 2", got)
	}
}
