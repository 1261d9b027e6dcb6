package core

import (
	"errors"
	"testing"
)

func TestNotFoundAs(t *testing.T) {
	hidden := NotFound("workspace not found")
	if err := NotFoundAs(hidden, "comment %s not found", "wsc-1"); KindOf(err) != KindNotFound || err.Error() != "comment wsc-1 not found" {
		t.Errorf("a not-found refusal: %v, want comment wsc-1 not found", err)
	}
	refused := Forbidden("insufficient permissions")
	if err := NotFoundAs(refused, "comment %s not found", "wsc-1"); err != refused {
		t.Errorf("a forbidden refusal: %v, want it unchanged", err)
	}
	other := errors.New("store down")
	if err := NotFoundAs(other, "x"); err != other {
		t.Errorf("another error: %v, want it unchanged", err)
	}
	if err := NotFoundAs(nil, "x"); err != nil {
		t.Errorf("nil: %v", err)
	}
}
