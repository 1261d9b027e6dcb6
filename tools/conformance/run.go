package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// adminRoles are go-tfe's admin token roles (helper_test.go
// getTokenForAdminRole). Terrace's site admin holds all of them.
var adminRoles = []string{"SITE_ADMIN", "CONFIGURATION", "PROVISION_LICENSES", "SUBSCRIPTION", "SUPPORT", "SECURITY_MAINTENANCE", "VERSION_MAINTENANCE"}

// Settings is the environment every go-tfe test gets, besides the server's
// address, token and CA. See helper_test.go in go-tfe:
//   - ENABLE_TFE stays unset: Terrace answers as HCP Terraform does, and
//     with ENABLE_TFE=1 every test that upgrades its organization's plan
//     (newSubscriptionUpdater) is skipped whole.
//   - ENABLE_BETA=1 runs the subtests of beta features too.
//   - The admin role tokens are the site token, so the plan-upgrade helper
//     (TFE_ADMIN_PROVISION_LICENSES_TOKEN) reaches Terrace's admin endpoints.
var Settings = []string{"ENABLE_BETA=1"}

// scrubbed are the variables a developer's shell may carry that would change
// what go-tfe's tests do; they are removed before ours are set.
var scrubbed = []string{"TFE_", "ENABLE_", "TFC_", "HYOK_", "GITHUB_", "OAUTH_CLIENT_", "SSL_CERT_"}

// testEnv is the environment of one test process.
func testEnv(t *Terrace, overrides []string) []string {
	env := withoutPrefixes(os.Environ(), scrubbed...)
	env = append(env, "TFE_ADDRESS="+t.URL, "TFE_TOKEN="+t.Token, "SSL_CERT_FILE="+t.CAFile)
	for _, r := range adminRoles {
		env = append(env, "TFE_ADMIN_"+r+"_TOKEN="+t.Token)
	}
	if t.ReceiverURL != "" {
		env = append(env, "TFC_RUN_TASK_URL="+t.ReceiverURL)
	}
	env = append(env, Settings...)
	return append(env, overrides...) // later entries win in os/exec
}

// Result is the outcome of one test process.
type Result struct {
	Store    string
	Name     string
	Excluded bool // run on request; does not count
	Pass     bool
	Why      string // for failures: exit status, panic, timeout, skip
	Output   []byte
	Duration time.Duration
}

// runTest runs one top-level go-tfe test in its own process: a nil-pointer
// panic in one test must not take the others down.
func runTest(ctx context.Context, g *GoTFE, t *Terrace, store string, e Entry, timeout time.Duration) Result {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, timeout+time.Minute) // the binary's own -test.timeout fires first
	defer cancel()
	cmd := exec.CommandContext(ctx, g.Binary, "-test.run", "^"+regexp.QuoteMeta(e.Name)+"$",
		"-test.count=1", "-test.v", "-test.timeout", timeout.String())
	cmd.Dir = g.SrcDir
	cmd.Env = testEnv(t, e.Env)
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	r := Result{Store: store, Name: e.Name, Excluded: e.Excluded, Output: out.Bytes(), Duration: time.Since(start)}
	r.Pass, r.Why = judge(e.Name, err, r.Output)
	if ctx.Err() != nil && !r.Pass {
		r.Why = "killed after " + (timeout + time.Minute).String()
	}
	return r
}

// judge decides a test's outcome from its exit status and output. Only a
// clean exit with the test's own "--- PASS" line is a pass: a whole-test
// skip proves nothing about Terrace, so an allow-listed test that go-tfe
// skips fails here (give it the environment it needs, or exclude it).
func judge(name string, runErr error, out []byte) (bool, string) {
	text := string(out)
	switch {
	case strings.Contains(text, "panic: test timed out"):
		return false, "timed out"
	case strings.Contains(text, "\npanic: ") || strings.HasPrefix(text, "panic: "):
		return false, "panicked"
	case runErr != nil:
		var ee *exec.ExitError
		if errors.As(runErr, &ee) {
			return false, ee.String()
		}
		return false, runErr.Error()
	case strings.Contains(text, "--- PASS: "+name+" ("):
		return true, ""
	case strings.Contains(text, "--- SKIP: "+name+" ("):
		return false, "skipped whole by go-tfe (" + skipReason(text) + "): it proves nothing; give it the environment it needs in allow.txt or move it to excluded.txt"
	default:
		return false, "the test did not run"
	}
}

// skipReason is the first log line of a skipped test (go-tfe's t.Skip text).
func skipReason(out string) string {
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "=== ") || strings.HasPrefix(l, "--- ") {
			continue
		}
		if _, msg, ok := strings.Cut(l, ": "); ok {
			return msg
		}
	}
	return "no reason given"
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// saveOutput writes a test's whole output under dir, for reading later.
func saveOutput(dir string, r Result) string {
	path := filepath.Join(dir, r.Store, "tests", r.Name+".log")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return ""
	}
	if err := os.WriteFile(path, r.Output, 0o644); err != nil {
		return ""
	}
	return path
}

// formatResult is the report of one result: a PASS/FAIL line, and for a
// failure the last lines of its output.
func formatResult(r Result, verbose bool, logPath string) string {
	var b strings.Builder
	status := "PASS"
	if !r.Pass {
		status = "FAIL"
	}
	if r.Excluded {
		status = "x" + status // an excluded test, run on request
	}
	fmt.Fprintf(&b, "%s %-8s %s (%s)", status, r.Store, r.Name, r.Duration.Round(10*time.Millisecond))
	if r.Why != "" {
		fmt.Fprintf(&b, ": %s", r.Why)
	}
	b.WriteString("\n")
	if (!r.Pass && !r.Excluded) || verbose {
		body := string(r.Output)
		if !verbose {
			body = tail(body, 30)
		}
		for _, l := range strings.Split(strings.TrimRight(body, "\n"), "\n") {
			b.WriteString("    | " + l + "\n")
		}
		if logPath != "" && !verbose {
			fmt.Fprintf(&b, "    (whole output: %s)\n", logPath)
		}
	}
	return b.String()
}
