package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/server"
)

// TestKeysRotate: `terrace keys rotate` on a data dir whose key was
// generated replaces the key file; the server starts with the new one,
// and rotating again works.
func TestKeysRotate(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	start := func() {
		t.Helper()
		s, err := server.New(ctx, server.Config{DataDir: dir, Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatalf("starting: %v", err)
		}
		s.Close()
	}
	start()
	before, err := os.ReadFile(filepath.Join(dir, seal.KEKFile))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		cmd := keysCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"rotate", "--data-dir", dir})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("rotate: %v", err)
		}
		if !strings.Contains(out.String(), "re-wrapped 1 data key") {
			t.Fatalf("rotate said %q", out.String())
		}
		start()
	}
	after, err := os.ReadFile(filepath.Join(dir, seal.KEKFile))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) {
		t.Fatal("the key file did not change")
	}
	if _, err := os.Stat(filepath.Join(dir, seal.KEKNextFile)); !os.IsNotExist(err) {
		t.Fatalf("%s left behind: %v", seal.KEKNextFile, err)
	}
	// Given by --kek, the new key must be given too.
	cmd := keysCmd()
	cmd.SetArgs([]string{"rotate", "--data-dir", dir, "--kek", strings.TrimSpace(string(after))})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "--new-kek") {
		t.Fatalf("rotate without --new-kek: %v", err)
	}
}

// TestKeysReencrypt: `terrace keys reencrypt` makes a new data key and
// re-seals under it; the server starts afterwards and the next run makes
// yet another key.
func TestKeysReencrypt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := server.New(ctx, server.Config{DataDir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("starting: %v", err)
	}
	s.Close()
	for _, want := range []string{"new data key dk2", "new data key dk3"} {
		cmd := keysCmd()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"reencrypt", "--data-dir", dir})
		if err := cmd.ExecuteContext(ctx); err != nil {
			t.Fatalf("reencrypt: %v", err)
		}
		if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "re-sealed") {
			t.Fatalf("reencrypt said %q, want %q", out.String(), want)
		}
		s, err := server.New(ctx, server.Config{DataDir: dir, Addr: "127.0.0.1:0"})
		if err != nil {
			t.Fatalf("starting after reencrypt: %v", err)
		}
		if got := s.Keys.Active(); got != strings.TrimPrefix(want, "new data key ") {
			t.Fatalf("the server seals under %q after the re-encryption, want the new key", got)
		}
		s.Close()
	}
	cmd := keysCmd()
	cmd.SetArgs([]string{"reencrypt", "--data-dir", t.TempDir()})
	if err := cmd.ExecuteContext(ctx); err == nil || !strings.Contains(err.Error(), "no key-encryption key") {
		t.Fatalf("reencrypt without a key: %v", err)
	}
}
