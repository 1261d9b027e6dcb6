package engine

import (
	"context"
	"os/exec"
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
	if err == nil || !strings.Contains(err.Error(), "0.0.1 is not installed") {
		t.Fatalf("missing version: %v", err)
	}
}
