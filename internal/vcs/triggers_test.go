package vcs_test

import (
	"testing"

	"github.com/terracehq/terrace/internal/vcs"
)

// TestTriggers: which pushes start a run, as HCP Terraform's file
// triggers decide: the working directory, trigger prefixes, trigger
// patterns with ** and *, and a push whose changed files are not all
// known (always runs).
func TestTriggers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		w         vcs.Workspace
		changed   []string
		truncated bool
		want      bool
	}{
		{"file triggers off", vcs.Workspace{}, []string{"docs/a.md"}, false, true},
		{"no working directory: any file", vcs.Workspace{FileTriggersEnabled: true}, []string{"docs/a.md"}, false, true},
		{"in the working directory", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live"}, []string{"docs/a.md", "live/main.tf"}, false, true},
		{"outside it", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live"}, []string{"docs/a.md", "lively/x.tf"}, false, false},
		{"outside it, but the list is cut", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live"}, []string{"docs/a.md"}, true, true},
		{"nothing changed", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live"}, nil, false, false},
		{"a trigger prefix", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "/live/", TriggerPrefixes: []string{"modules/"}},
			[]string{"modules/net/main.tf"}, false, true},
		{"a pattern with **", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live", TriggerPatterns: []string{"/modules/**/*.tf"}},
			[]string{"modules/a/b/c.tf"}, false, true},
		{"** matches no folder too", vcs.Workspace{FileTriggersEnabled: true, TriggerPatterns: []string{"modules/**/*.tf"}},
			[]string{"modules/c.tf"}, false, true},
		{"patterns replace the working directory", vcs.Workspace{FileTriggersEnabled: true, WorkingDirectory: "live", TriggerPatterns: []string{"*.tf"}},
			[]string{"live/main.tf"}, false, false},
		{"a pattern that does not match", vcs.Workspace{FileTriggersEnabled: true, TriggerPatterns: []string{"live/*.tf"}},
			[]string{"live/sub/main.tf", "live/README.md"}, false, false},
	} {
		if got := vcs.Triggers(&tc.w, tc.changed, tc.truncated); got != tc.want {
			t.Errorf("%s: Triggers = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTagVersion: which tags publish a registry module's version, and
// which version (a semantic version after the tag prefix, with or
// without "v").
func TestTagVersion(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		prefix, tag, want string
	}{
		{"", "v1.2.0", "1.2.0"},
		{"", "1.2.0", "1.2.0"},
		{"", "v1.0.0-rc.1+build.5", "1.0.0-rc.1+build.5"},
		{"", "v1.2", ""},
		{"", "nightly", ""},
		{"", "v01.2.0", ""},
		{"", "vv1.2.0", ""},
		{"", "release-1.2.0", ""},
		{"net/", "net/v1.0.0", "1.0.0"},
		{"net/", "v1.0.0", ""},
		{"net/", "other/v1.0.0", ""},
		{"a.b-", "a.b-2.0.0", "2.0.0"},
		{"a.b-", "axb-2.0.0", ""}, // the prefix is literal, not a pattern
	} {
		got, ok := vcs.TagVersion(tc.prefix, tc.tag)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("TagVersion(%q, %q) = %q %v, want %q", tc.prefix, tc.tag, got, ok, tc.want)
		}
	}
}
