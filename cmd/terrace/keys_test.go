package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/idtoken"
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

// TestKeysRotateIdentity: `terrace keys rotate-identity` on a server's data
// dir adds the signing key the server's tokens then carry.
func TestKeysRotateIdentity(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := server.New(ctx, server.Config{DataDir: dir, Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("starting: %v", err)
	}
	defer s.Close()
	s.Identity.Refresh = 0
	first, err := s.Identity.KeySet(ctx)
	if err != nil || len(first) != 1 {
		t.Fatalf("key set: %v, %v", first, err)
	}
	cmd := keysCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"rotate-identity", "--data-dir", dir})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("rotate-identity: %v", err)
	}
	if !strings.Contains(out.String(), "signed with key") || !strings.Contains(out.String(), "0 replaced key(s) dropped") {
		t.Fatalf("rotate-identity said %q", out.String())
	}
	set, err := s.Identity.KeySet(ctx)
	if err != nil || len(set) != 2 {
		t.Fatalf("the server's key set after the rotation: %v, %v", set, err)
	}
	tok, err := s.Identity.DeploymentToken(ctx, idtoken.Deployment{}, []string{"aud"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(tok, ".")
	raw, _ := base64.RawURLEncoding.DecodeString(header)
	if strings.Contains(string(raw), first[0].Kid) {
		t.Errorf("the server still signs with the replaced key: header %s", raw)
	}
}
