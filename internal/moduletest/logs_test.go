package moduletest_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/store"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestAnEndedTestRunsLogHasItsEnd: the status that ends a test run and the
// end of its log commit together, whichever way it ends (its executor's
// report, or the reaper's for an executor that went silent). A client
// that reads the log once it sees the final status (go-tfe's log reader
// stops at an ended run) reads why it ended. The OnEnded hooks run right
// after that commit, before the log is folded: what they read is what
// such a client could have read.
func TestAnEndedTestRunsLogHasItsEnd(t *testing.T) {
	testenv.ForEachStore(t, func(t *testing.T, e *testenv.Env) {
		ctx := context.Background()
		// At each end, the log of every errored test run not seen before.
		var mu sync.Mutex
		atEnd := map[string]string{} // test run → its log when it ended
		e.Server.ModuleTests.OnEnded = append(e.Server.ModuleTests.OnEnded, func(string, time.Time, time.Time) {
			mu.Lock()
			defer mu.Unlock()
			ids, err := store.Strings(ctx, e.Server.DB, `SELECT id FROM module_test_runs WHERE status = 'errored'`)
			if err != nil {
				t.Errorf("reading the ended test runs: %v", err)
			}
			for _, id := range ids {
				if _, ok := atEnd[id]; ok {
					continue
				}
				b, err := e.Server.Runs.ReadLog(ctx, id, 0, 0)
				if err != nil {
					t.Errorf("reading the log of test run %s as it ended: %v", id, err)
				}
				atEnd[id] = string(b)
			}
		})
		readAtEnd := func(id string) string {
			mu.Lock()
			defer mu.Unlock()
			log, ok := atEnd[id]
			if !ok {
				t.Fatalf("test run %s was not seen ending", id)
			}
			return log
		}
		testenv.NewOrg(t, e.Client, "acme")
		id := testenv.EnableModuleTests(ctx, t, e.Client, "acme", "logs", "null")

		// Reported: terraform init fails on a configuration that does not
		// parse, and the executor reports the run errored, with why.
		tr := testenv.StartTestRun(ctx, t, e.Client, id, map[string]string{
			"main.tf":                "this is { not terraform\n",
			"tests/never.tftest.hcl": "run \"never\" {}\n",
		})
		if last := testenv.WaitTestRun(ctx, t, e.Client, id, tr.ID); last.Status != tfe.TestRunErrored {
			t.Fatalf("a test run whose init fails: %s, want errored", last.Status)
		}
		if log := readAtEnd(tr.ID); !strings.Contains(log, "terraform init failed") {
			t.Errorf("the log as the run's errored status committed lacks why:\n%q", log)
		}

		// Reaped: a running run whose lease another executor held and let
		// run out.
		slow := testenv.StartTestRun(ctx, t, e.Client, id, map[string]string{
			"main.tf":               "resource \"terraform_data\" \"slow\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 60\"\n  }\n}\n",
			"tests/slow.tftest.hcl": "run \"waits\" {}\n",
		})
		testenv.WaitTestRun(ctx, t, e.Client, id, slow.ID, tfe.TestRunRunning)
		if _, err := e.Server.DB.Exec(ctx, `UPDATE module_test_runs SET runner_id = 'a-replica-that-died', lease_until = 1 WHERE id = ?`, slow.ID); err != nil {
			t.Fatal(err)
		}
		if last := testenv.WaitTestRun(ctx, t, e.Client, id, slow.ID); last.Status != tfe.TestRunErrored {
			t.Fatalf("a test run whose executor went silent: %s, want errored", last.Status)
		}
		if log := readAtEnd(slow.ID); !strings.Contains(log, "stopped before it ended") {
			t.Errorf("the log as the reaped run's status committed lacks why:\n%q", log)
		}
		// Folded after the commit: the whole log, closed with ETX.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			b, err := e.Server.Runs.ReadLog(ctx, slow.ID, 0, 0)
			if err == nil && strings.Contains(string(b), "stopped before it ended") && strings.HasSuffix(string(b), "\x03") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the reaped run's log 10 s after it ended: %q, %v (want the reason, then ETX)", b, err)
			}
		}
	})
}
