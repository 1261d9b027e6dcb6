package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestBenchmarksRun runs make bench's measurements (a) to (f) once, each
// as small as its flags allow, and fails if one cannot finish. The figures
// mean nothing at this size; the point is that the benchmark still runs:
// a change elsewhere (invited users acting only once they accept) once
// stopped (e) for a day, and make bench is not part of CI. (g) is left
// out: it waits a minute for the idle figure.
func TestBenchmarksRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every benchmark once: skipped with -short")
	}
	if _, err := exec.LookPath("terraform"); err != nil {
		t.Fatalf("the benchmarks compare with terraform, which is not on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "run", ".", "-only", "abcdef",
		"-iterations", "1", "-cli-iterations", "1", "-poll-heavy", "0", "-plans", "2",
		"-workspaces", "5", "-chain", "3", "-fanout", "3",
		"-read-for", "300ms", "-readers", "4", "-histories", "100")
	cmd.Env = os.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("go run ./tools/bench: %v\n%s", err, out.String())
	}
	for _, want := range []string{"\n(a) ", "\n(b) ", "\n(c) ", "\n(d) ", "\n(e) ", "\n(f) ", "Workspaces.Read: "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the benchmarks' output has no %q:\n%s", strings.TrimSpace(want), out.String())
		}
	}
}
