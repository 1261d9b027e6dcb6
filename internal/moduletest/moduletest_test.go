package moduletest

import (
	"slices"
	"strings"
	"testing"
)

// TestTransitions: a run moves only forward, and ended runs never move.
func TestTransitions(t *testing.T) {
	t.Parallel()
	allowed := map[[2]Status]bool{
		{StatusQueued, StatusRunning}: true, {StatusQueued, StatusCanceled}: true,
		{StatusRunning, StatusFinished}: true, {StatusRunning, StatusErrored}: true, {StatusRunning, StatusCanceled}: true,
	}
	all := []Status{StatusQueued, StatusRunning, StatusFinished, StatusErrored, StatusCanceled}
	// Statuses (the metrics' series) names every status a move knows.
	if strings.Join(statusStrings(Statuses), ",") != strings.Join(statusStrings(all), ",") {
		t.Errorf("Statuses = %v, want %v", Statuses, all)
	}
	for from, tos := range moves {
		for _, st := range append([]Status{from}, tos...) {
			if !slices.Contains(Statuses, st) {
				t.Errorf("status %s of a move is not in Statuses", st)
			}
		}
	}
	for _, from := range all {
		for _, to := range all {
			if err := transition(from, to); (err == nil) != allowed[[2]Status{from, to}] {
				t.Errorf("%s -> %s: %v", from, to, err)
			}
		}
	}
	for _, s := range all {
		if s.Ended() != (s == StatusFinished || s == StatusErrored || s == StatusCanceled) {
			t.Errorf("%s.Ended() = %v", s, s.Ended())
		}
	}
}

func statusStrings(ss []Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// TestCreateOptionsCheck: paths stay inside the module and cannot pass
// for flags; variables are identifiers with HCL values.
func TestCreateOptionsCheck(t *testing.T) {
	t.Parallel()
	ok := []CreateOptions{
		{ConfigurationVersionID: "cv-1"},
		{ConfigurationVersionID: "cv-1", RunOptions: RunOptions{TestDirectory: "tests", Filters: []string{"tests/a.tftest.hcl", "b.tftest.hcl"}}},
		{ConfigurationVersionID: "cv-1", RunOptions: RunOptions{TestDirectory: "sub/dir/tests"}},
		{ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "name", Value: `"world"`}, {Key: "n", Value: "3"}, {Key: "m", Value: `{ a = [1, 2] }`}}},
	}
	for _, o := range ok {
		if err := o.check(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
	bad := map[string]CreateOptions{
		"no configuration": {},
		"parent folder":    {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{TestDirectory: "../tests"}},
		"inner parent":     {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{TestDirectory: "a/../../b"}},
		"absolute":         {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{TestDirectory: "/etc"}},
		"a flag":           {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{Filters: []string{"-chdir=/"}}},
		"a newline":        {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{Filters: []string{"a\nb"}}},
		"a backslash":      {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{Filters: []string{`..\x`}}},
		"empty filter":     {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{Filters: []string{""}}},
		"parallelism":      {ConfigurationVersionID: "cv-1", RunOptions: RunOptions{Parallelism: -1}},
		"key":              {ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "a=b", Value: "1"}}},
		"twice":            {ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}},
		"value":            {ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "a", Value: `"unterminated`}}},
		"two values":       {ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "a", Value: "1\nb = 2"}}},
		"long value":       {ConfigurationVersionID: "cv-1", Variables: []Variable{{Key: "a", Value: `"` + strings.Repeat("x", maxValue) + `"`}}},
	}
	for name, o := range bad {
		if err := o.check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSummary: the verdict and counts come from terraform test's
// test_summary line, whatever the writes' boundaries; other lines and
// broken ones are ignored.
func TestSummary(t *testing.T) {
	t.Parallel()
	log := `{"@level":"info","@message":"Terraform 1.11.4","type":"version"}
{"@message":"a \"test_summary\" in a message","type":"test_run"}
not json "test_summary"
{"@level":"info","@message":"Failure! 1 passed, 2 failed.","test_summary":{"status":"fail","passed":1,"failed":2,"errored":0,"skipped":3},"type":"test_summary"}
`
	for _, size := range []int{1, 7, len(log)} {
		s := &summary{}
		for i := 0; i < len(log); i += size {
			end := min(i+size, len(log))
			if _, err := s.Write([]byte(log[i:end])); err != nil {
				t.Fatal(err)
			}
		}
		if !s.found || s.verdict != TestFail || s.counts != (Counts{Passed: 1, Failed: 2, Skipped: 3}) {
			t.Errorf("writes of %d bytes: %+v", size, s)
		}
	}
	s := &summary{}
	_, _ = s.Write([]byte(`{"test_summary":{"status":"bogus","passed":1},"type":"test_summary"}` + "\n"))
	if s.found {
		t.Errorf("a summary with an unknown status was taken: %+v", s)
	}
}
