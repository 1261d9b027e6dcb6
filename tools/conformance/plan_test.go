package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func writePlan(t *testing.T, groups, allow, excluded string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"groups.txt": groups, "allow.txt": allow, "excluded.txt": excluded} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadPlan(t *testing.T) {
	dir := writePlan(t,
		"# groups\nTestOrganizations\n",
		"# comment\n\nTestOrganizationsList\nTestOrganizationsRead  ENABLE_TFE=1 FOO=  # trailing comment\nTestOrganizationsAll own-server ENABLE_TFE=1\n",
		"TestOrganizationsUpdate\tnot implemented yet: agent pools\nTestOrganizationsDelete    needs a run executor (_RunDependent)\n")
	p, err := LoadPlan(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Groups) != 1 || p.Groups[0] != "TestOrganizations" {
		t.Errorf("groups = %q", p.Groups)
	}
	if len(p.Allow) != 3 || p.Allow[1].Name != "TestOrganizationsRead" || strings.Join(p.Allow[1].Env, " ") != "ENABLE_TFE=1 FOO=" || p.Allow[1].Line != 4 || p.Allow[1].OwnServer {
		t.Errorf("allow = %+v", p.Allow)
	}
	if a := p.Allow[2]; !a.OwnServer || strings.Join(a.Env, " ") != "ENABLE_TFE=1" || p.Allow[0].OwnServer {
		t.Errorf("own-server entry = %+v (first %+v)", a, p.Allow[0])
	}
	if len(p.Excluded) != 2 || p.Excluded[0].Reason != "not implemented yet: agent pools" || p.Excluded[1].Reason != "needs a run executor (_RunDependent)" {
		t.Errorf("excluded = %+v", p.Excluded)
	}
	if got := p.ReasonCounts(); len(got) != 2 || !strings.Contains(got[0], "needs a run executor") {
		t.Errorf("reason counts = %q", got)
	}
}

func TestLoadPlanRefusesMalformedLines(t *testing.T) {
	for name, c := range map[string]struct{ groups, allow, excluded, want string }{
		"no reason":      {"TestX\n", "", "TestXOne\n", "has no reason"},
		"unknown reason": {"TestX\n", "", "TestXOne  flaky\n", "must start with one of"},
		"bad env word":   {"TestX\n", "TestXOne lowercase=1\n", "", "KEY=VALUE"},
		"unknown word":   {"TestX\n", "TestXOne own_server\n", "", "own-server may follow"},
		"not a test":     {"TestX\n", "Example\n", "", "not a top-level test name"},
		"bad group line": {"TestX TestY\n", "", "", "one test-name prefix"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadPlan(writePlan(t, c.groups, c.allow, c.excluded))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %q", err, c.want)
			}
		})
	}
}

func TestCheck(t *testing.T) {
	available := []string{"TestTeamsList", "TestTeamsRead", "TestTeamsDelete", "TestTeamAccessList", "TestUsersRead"}
	p := &Plan{
		Groups: []string{"TestTeams"},
		Allow:  []Entry{{Name: "TestTeamsList", Line: 1}, {Name: "TestTeamsList", Line: 2}, {Name: "TestGone", Line: 3}, {Name: "TestUsersRead", Line: 4}},
		Excluded: []Exclusion{
			{Name: "TestTeamsList", Reason: "x", Line: 1},
			{Name: "TestTeamsRead", Reason: "x", Line: 2},
		},
	}
	got := strings.Join(p.Check(available), "\n")
	for _, want := range []string{
		"allow.txt:2: TestTeamsList is already listed on line 1",
		"allow.txt:3: TestGone is not a test of go-tfe",
		"excluded.txt:1: TestTeamsList is also allow-listed",
		"TestTeamsDelete belongs to a covered group but is in neither",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("problems do not mention %q:\n%s", want, got)
		}
	}
	// TestTeamAccessList is outside the group (prefix TestTeams, not TestTeam);
	// TestUsersRead is allowed outside any group: both are fine.
	if strings.Contains(got, "TestTeamAccessList") || strings.Contains(got, "TestUsersRead") {
		t.Errorf("problems mention a test outside the groups:\n%s", got)
	}
	ok := &Plan{Groups: []string{"TestTeams"}, Allow: []Entry{{Name: "TestTeamsList"}}, Excluded: []Exclusion{{Name: "TestTeamsRead", Reason: "x"}, {Name: "TestTeamsDelete", Reason: "x"}}}
	if problems := ok.Check(available); len(problems) != 0 {
		t.Errorf("a complete plan has problems: %q", problems)
	}
}

func TestJudge(t *testing.T) {
	exit1 := exec.Command("sh", "-c", "exit 1").Run()
	if exit1 == nil {
		t.Fatal("sh -c 'exit 1' succeeded")
	}
	for name, c := range map[string]struct {
		err  error
		out  string
		pass bool
		why  string
	}{
		"pass":          {nil, "=== RUN   TestA\n--- PASS: TestA (0.01s)\nPASS\n", true, ""},
		"failure":       {exit1, "--- FAIL: TestA (0.01s)\n    --- PASS: TestA/x (0.00s)\nFAIL\n", false, "exit status 1"},
		"panic":         {exit1, "--- FAIL: TestA (0.01s)\npanic: runtime error: invalid memory address [recovered]\n", false, "panicked"},
		"timeout":       {exit1, "panic: test timed out after 5m0s\n", false, "timed out"},
		"whole skip":    {nil, "=== RUN   TestA\n    x_test.go:3: Set ENABLE_TFE=1 to run.\n--- SKIP: TestA (0.00s)\nPASS\n", false, "Set ENABLE_TFE=1 to run."},
		"subtest skip":  {nil, "    --- SKIP: TestA/x (0.00s)\n--- PASS: TestA (0.01s)\n", true, ""},
		"nothing ran":   {nil, "testing: warning: no tests to run\nPASS\n", false, "did not run"},
		"other test":    {nil, "--- PASS: TestAB (0.01s)\n", false, "did not run"},
		"cannot start":  {errors.New("fork/exec: no such file"), "", false, "no such file"},
		"pass, exit 1?": {exit1, "--- PASS: TestA (0.01s)\nFAIL\n", false, "exit status 1"},
	} {
		t.Run(name, func(t *testing.T) {
			pass, why := judge("TestA", c.err, []byte(c.out))
			if pass != c.pass || !strings.Contains(why, c.why) {
				t.Errorf("judge = %v, %q; want %v, %q", pass, why, c.pass, c.why)
			}
		})
	}
}

func TestTestEnvScrubsAndOverrides(t *testing.T) {
	t.Setenv("TFE_TOKEN", "developer-token")
	t.Setenv("ENABLE_TFE", "1")
	t.Setenv("OAUTH_CLIENT_GITHUB_TOKEN", "secret")
	env := testEnv(&Terrace{URL: "https://localhost:1", Token: "site", CAFile: "/ca.pem"}, []string{"ENABLE_BETA=0"})
	last := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		last[k] = v
	}
	for k, want := range map[string]string{
		"TFE_ADDRESS": "https://localhost:1", "TFE_TOKEN": "site", "SSL_CERT_FILE": "/ca.pem",
		"TFE_ADMIN_PROVISION_LICENSES_TOKEN": "site", "ENABLE_BETA": "0",
	} {
		if last[k] != want {
			t.Errorf("%s = %q, want %q", k, last[k], want)
		}
	}
	for _, k := range []string{"ENABLE_TFE", "OAUTH_CLIENT_GITHUB_TOKEN"} {
		if _, ok := last[k]; ok {
			t.Errorf("%s leaked into the test environment", k)
		}
	}
}

// TestRepositoryPlan checks the repository's own plan files parse: a
// malformed line there would only show up when the harness runs.
func TestRepositoryPlan(t *testing.T) {
	p, err := LoadPlan("../../conformance")
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Allow) == 0 || len(p.Groups) == 0 {
		t.Fatalf("the plan is empty: %+v", p)
	}
	for _, e := range p.Allow {
		if !p.InGroups(e.Name) {
			continue
		}
		for _, x := range p.Excluded {
			if x.Name == e.Name {
				t.Errorf("%s is both allowed and excluded", e.Name)
			}
		}
	}
}
