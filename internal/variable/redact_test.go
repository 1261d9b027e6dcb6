package variable

import (
	"errors"
	"strings"
	"testing"
)

func TestRedactErr(t *testing.T) {
	err := redactErr(errors.New(`insert failed near "hunter2"`), "hunter2")
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "***") {
		t.Fatalf("redacted error: %v", err)
	}
	plain := errors.New("boom")
	if redactErr(plain, "") != plain || redactErr(plain, "x") != plain {
		t.Fatal("unrelated errors must pass through unchanged")
	}
}
