package sshkey

import (
	"errors"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/core"
)

func TestRedact(t *testing.T) {
	err := redact(errors.New(`insert failed near "hunter2"`), "hunter2")
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("redacted error: %v", err)
	}
	plain := errors.New("boom")
	if redact(plain, "") != plain || redact(nil, "x") != nil {
		t.Fatal("errors without a value to hide must pass through")
	}
	ce := core.Invalid("value is required")
	if redact(ce, "x") != ce {
		t.Fatal("our own errors carry no value and must keep their kind")
	}
}
