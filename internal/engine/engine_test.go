package engine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		t.Fatal("terraform is not on PATH: this test needs it")
	}
	f := &Finder{Dir: t.TempDir()}
	ctx := context.Background()
	if p, err := f.Find(ctx, "latest"); err != nil || p != tf {
		t.Fatalf("latest: %q %v", p, err)
	}
	v, err := f.Version(ctx, tf)
	if err != nil || v == "" {
		t.Fatalf("version: %q %v", v, err)
	}
	if p, err := f.Find(ctx, v); err != nil || p != tf {
		t.Fatalf("exact %s: %q %v", v, p, err)
	}
	_, err = f.Find(ctx, "0.0.1")
	if err == nil || !strings.Contains(err.Error(), "0.0.1 is not installed on this server") {
		t.Fatalf("missing version: %v", err)
	}
	// On an agent the message names the agent.
	onAgent := &Finder{Dir: f.Dir, Host: `agent "a1"`}
	if _, err := onAgent.Find(ctx, "0.0.1"); err == nil || !strings.Contains(err.Error(), `0.0.1 is not installed on agent "a1"`) {
		t.Fatalf("missing version on an agent: %v", err)
	}
}

// TestVersionAskedOncePerBinary: the finder asks a binary its version once,
// however many runs use it, and asks again when the file is replaced.
func TestVersionAskedOncePerBinary(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	bin := filepath.Join(dir, "terraform", "9.9.9", "terraform")
	write := func(version string) {
		t.Helper()
		script := fmt.Sprintf("#!/bin/sh\necho called >> %q\necho '{\"terraform_version\":%q}'\n", calls, version)
		if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(bin, []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	count := func() int {
		b, _ := os.ReadFile(calls)
		return strings.Count(string(b), "called")
	}
	write("9.9.9")
	f := &Finder{Dir: dir}
	ctx := context.Background()
	for range 3 {
		if p, err := f.Find(ctx, "9.9.9"); err != nil || p != bin {
			t.Fatalf("find 9.9.9: %q %v", p, err)
		}
		if v, err := f.Version(ctx, bin); err != nil || v != "9.9.9" {
			t.Fatalf("version: %q %v", v, err)
		}
	}
	if n := count(); n != 1 {
		t.Fatalf("the binary was asked its version %d times, want once", n)
	}
	// Replaced in place by another build: asked again, new answer.
	write("9.9.10-dev")
	if v, err := f.Version(ctx, bin); err != nil || v != "9.9.10" {
		t.Fatalf("version after replacing the binary: %q %v", v, err)
	}
	if n := count(); n != 2 {
		t.Fatalf("after the binary was replaced it was asked %d times in all, want 2", n)
	}
}
