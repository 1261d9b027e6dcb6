package vcs

import "testing"

// TestModuleTestStatusOf: each status of a test run, and each verdict of
// a finished one, is one commit status.
func TestModuleTestStatusOf(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		run         ModuleTestRun
		state, desc string
	}{
		{ModuleTestRun{Status: "queued"}, "pending", "Tests queued"},
		{ModuleTestRun{Status: "running"}, "pending", "Tests running"},
		{ModuleTestRun{Status: "finished", TestStatus: "pass", Passed: 3}, "success", "Tests passed: 3 passed, 0 failed, 0 errored, 0 skipped"},
		{ModuleTestRun{Status: "finished", TestStatus: "skip", Skipped: 2}, "success", "Tests passed: 0 passed, 0 failed, 0 errored, 2 skipped"},
		{ModuleTestRun{Status: "finished", TestStatus: "fail", Passed: 1, Failed: 2}, "failure", "Tests failed: 1 passed, 2 failed, 0 errored, 0 skipped"},
		{ModuleTestRun{Status: "finished", TestStatus: "error", Errored: 1}, "failure", "Tests errored: 0 passed, 0 failed, 1 errored, 0 skipped"},
		{ModuleTestRun{Status: "canceled"}, "error", "Test run canceled"},
		{ModuleTestRun{Status: "errored"}, "error", "Test run errored"},
	} {
		if state, desc := moduleTestStatusOf(c.run); state != c.state || desc != c.desc {
			t.Errorf("%+v: %s %q, want %s %q", c.run, state, desc, c.state, c.desc)
		}
	}
}
