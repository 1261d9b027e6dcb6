package tfeapi

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestAbandonedRequestIsNotAnError: an internal error that is only the
// request's own context ending (the caller left, the server stops) is not
// logged as a failure; any other internal error is.
func TestAbandonedRequestIsNotAnError(t *testing.T) {
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Cleanup(func() { slog.SetDefault(old) })

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodPut, "/api/agent/jobs/job-1/plan-json", nil).WithContext(ctx)
	Error(httptest.NewRecorder(), r, ctx.Err())
	if logs.Len() != 0 {
		t.Fatalf("an abandoned request was logged at info or above: %s", logs.String())
	}

	r = httptest.NewRequest(http.MethodPut, "/api/agent/jobs/job-1/plan-json", nil)
	w := httptest.NewRecorder()
	Error(w, r, errors.New("disk full"))
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "disk full") {
		t.Fatalf("an internal error was not logged as an error: %q", logs.String())
	}
	if w.Code != http.StatusInternalServerError || strings.Contains(w.Body.String(), "disk full") {
		t.Fatalf("an internal error answered %d %s", w.Code, w.Body.String())
	}
}
