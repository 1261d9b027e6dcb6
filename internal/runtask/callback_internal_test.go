package runtask

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/store/storetest"
)

// TestCallbackRace: a task service's callback moves its result from the
// status it read, and the server's own bookkeeping may move the result
// between that read and the move (the delivery marks the request accepted,
// pending to running, after the service answered, and a service may call
// back before that). A callback that loses that race reads again and
// moves the result from where it is now; one that finds it final is
// refused as such. The hook makes each race happen at the same point on
// every run, on both stores.
func TestCallbackRace(t *testing.T) {
	storetest.ForEachDB(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		insertRun(t, db, "run-race", "ws-race", "post_plan_running")
		if _, err := db.Exec(ctx, `INSERT INTO task_stages (`+stageCols+`) VALUES ('ts-race', 'run-race', 'acme', 'ws-race', 'post_plan', 'running', '{}', 1, 1)`); err != nil {
			t.Fatal(err)
		}
		result := func(id string) {
			t.Helper()
			if _, err := db.Exec(ctx, `INSERT INTO task_results (id, stage_id, run_id, task_id, task_name, task_url, workspace_task_id, enforcement_level, status, outcomes, status_timestamps, created_at, updated_at)
				VALUES (?, 'ts-race', 'run-race', 'task-race', 'race', 'https://task.test', 'wstask-race', 'advisory', 'pending', '[]', '{}', 1, 1)`, id); err != nil {
				t.Fatal(err)
			}
		}
		s := &Service{o: Options{DB: db, ProgressTimeout: time.Minute}}
		// moveBy moves the result as the server would, behind the callback's back.
		moveBy := func(id string, to ResultStatus) {
			t.Helper()
			r, err := s.loadResult(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok, err := moveResult(ctx, db, r, to, ""); err != nil || !ok {
				t.Fatalf("moving %s from %s to %s: %v %v", id, r.Status, to, ok, err)
			}
		}
		as := func(id string) context.Context {
			return auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindTaskResult, TaskResultID: id})
		}

		// The delivery records the request accepted between the read
		// and the move: the callback goes on from running.
		result("taskrs-accepted")
		var attempts []int
		s.beforeMove = func(n int) {
			attempts = append(attempts, n)
			if n == 1 {
				moveBy("taskrs-accepted", ResultRunning)
			}
		}
		if err := s.Callback(as("taskrs-accepted"), "taskrs-accepted", Report{Status: ResultRunning, Message: "still checking"}); err != nil {
			t.Fatalf("a callback that lost the race to the delivery's acceptance: %v", err)
		}
		if len(attempts) != 2 {
			t.Errorf("the callback tried %v times, want twice (it lost once)", attempts)
		}
		r, err := s.loadResult(ctx, "taskrs-accepted")
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != ResultRunning || r.Message != "still checking" {
			t.Errorf("after the lost race: %s %q, want running with the callback's message", r.Status, r.Message)
		}

		// The result becomes final meanwhile (its run ended): refused as
		// final, and the result keeps what ended it.
		result("taskrs-canceled")
		s.beforeMove = func(n int) {
			if n == 1 {
				moveBy("taskrs-canceled", ResultCanceled)
			}
		}
		err = s.Callback(as("taskrs-canceled"), "taskrs-canceled", Report{Status: ResultPassed, Message: "all good"})
		if core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "already canceled") {
			t.Errorf("a callback on a result canceled meanwhile: %v (%v), want it refused as already canceled", err, core.KindOf(err))
		}
		if r, err := s.loadResult(ctx, "taskrs-canceled"); err != nil || r.Status != ResultCanceled || r.Message != "" {
			t.Errorf("the canceled result after the refused callback: %+v %v", r, err)
		}

		// Accepted after the first read, timed out after the second (the
		// progress deadline passed): refused as errored, nothing written.
		// The status only moves forward, so a callback loses at most
		// these two races and reads a final result on its third try.
		result("taskrs-late")
		attempts = nil
		s.beforeMove = func(n int) {
			attempts = append(attempts, n)
			switch n {
			case 1:
				moveBy("taskrs-late", ResultRunning)
			case 2:
				moveBy("taskrs-late", ResultErrored)
			}
		}
		err = s.Callback(as("taskrs-late"), "taskrs-late", Report{Status: ResultRunning, Message: "mine"})
		if core.KindOf(err) != core.KindInvalid || !strings.Contains(err.Error(), "already errored") {
			t.Errorf("a callback that lost twice, the second time to the deadline: %v (%v), want it refused as already errored", err, core.KindOf(err))
		}
		if len(attempts) != 2 {
			t.Errorf("the callback moved after %v reads, want 2 (its third read found the result final)", attempts)
		}
		if r, err := s.loadResult(ctx, "taskrs-late"); err != nil || r.Status != ResultErrored || r.Message == "mine" {
			t.Errorf("the errored result after the refused callback: %+v %v", r, err)
		}
	})
}
