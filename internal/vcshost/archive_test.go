package vcshost_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/vcshost"
)

// TestArchiveRefuses: only a full SHA from an http(s) URL without
// credentials is fetched; anything else is refused before git runs.
func TestArchiveRefuses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sha := strings.Repeat("a", 40)
	for name, tc := range map[string][2]string{
		"ext transport":      {"ext::sh -c touch% pwned", sha},
		"file":               {"file:///etc", sha},
		"scp-like":           {"git@github.com:acme/infra.git", sha},
		"credentials in URL": {"https://x-access-token:tok3n@github.com/acme/infra.git", sha},
		"option as a SHA":    {"https://github.com/acme/infra.git", "--upload-pack=touch pwned"},
		"branch name":        {"https://github.com/acme/infra.git", "main"},
		"abbreviated SHA":    {"https://github.com/acme/infra.git", sha[:12]},
	} {
		_, err := vcshost.Archive(ctx, tc[0], "tok3n", tc[1], nil, 1<<20)
		if err == nil || strings.Contains(err.Error(), "tok3n") || strings.Contains(err.Error(), "git ") {
			t.Errorf("%s: %v, want a refusal before git runs, without the token", name, err)
		}
	}
	if _, err := vcshost.Archive(ctx, "https://github.com/acme/infra.git", "", sha, nil, 0); err == nil {
		t.Error("no size limit: no error")
	}
}

// TestArchiveTimeout: a host that never answers does not hold Archive
// past its context: git is killed.
func TestArchiveTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = vcshost.Archive(ctx, "https://"+ln.Addr().String()+"/acme/infra.git", "tok3n", strings.Repeat("b", 40), nil, 1<<20)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Archive from a silent host: %v, want the context's deadline", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Archive returned %s after its deadline", d)
	}
}
