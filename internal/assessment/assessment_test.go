package assessment

import (
	"os"
	"slices"
	"testing"

	"github.com/terracehq/terrace/internal/notify"
)

// TestSummarize reads drift and checks from the JSON of a refresh-only
// plan as terraform show -json writes it: managed drift only, child
// modules counted.
func TestSummarize(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/refresh-only-plan.json")
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := summarize(&r, raw); err != nil {
		t.Fatal(err)
	}
	if !r.Drifted || r.ResourcesDrifted != 1 || r.ResourcesUndrifted != 2 || !slices.Equal(r.DriftedResources, []string{"local_file.f"}) {
		t.Fatalf("drift: %+v", r)
	}
	if r.ChecksPassed != 1 || r.ChecksFailed != 1 || r.ChecksUnknown != 1 || r.ChecksErrored != 0 {
		t.Fatalf("checks: %+v", r)
	}
	if err := summarize(&Result{}, []byte("not json")); err == nil {
		t.Fatal("a plan that is not JSON was summarized")
	}
}

// TestFires: new or changed drift, new or changed check failures, and a
// failure after a success notify; an unchanged state does not.
func TestFires(t *testing.T) {
	t.Parallel()
	ok := &Result{Succeeded: true}
	drift := func(addrs ...string) *Result {
		return &Result{Succeeded: true, Drifted: true, DriftedResources: addrs, ResourcesDrifted: len(addrs)}
	}
	failed := &Result{}
	checks := &Result{Succeeded: true, ChecksFailed: 2}
	cases := []struct {
		name       string
		res, prior *Result
		want       []notify.Trigger
	}{
		{"first, clean", ok, nil, nil},
		{"first, drifted", drift("a"), nil, []notify.Trigger{notify.AssessmentDrifted}},
		{"drift appears", drift("a"), ok, []notify.Trigger{notify.AssessmentDrifted}},
		{"same drift again", drift("a"), drift("a"), nil},
		{"drift grows", drift("a", "b"), drift("a"), []notify.Trigger{notify.AssessmentDrifted}},
		{"drift goes", ok, drift("a"), nil},
		{"checks fail", checks, ok, []notify.Trigger{notify.AssessmentCheck}},
		{"checks still fail", checks, checks, nil},
		{"fails after success", failed, ok, []notify.Trigger{notify.AssessmentFailed}},
		{"fails again", failed, failed, nil},
	}
	for _, c := range cases {
		if got := fires(c.res, c.prior); !slices.Equal(got, c.want) {
			t.Errorf("%s: fires %v, want %v", c.name, got, c.want)
		}
	}
}
