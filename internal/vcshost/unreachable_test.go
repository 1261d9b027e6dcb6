package vcshost_test

import (
	"context"
	"net"
	"strings"
	"testing"

	"github.com/terracehq/terrace/internal/vcshost"
)

// TestUnreachableHostSaysSo: a host that does not answer (a closed port;
// tests ask no name server) is reported as a person reads it (what
// was asked, the host, why), not with the request Go's client repeats.
func TestUnreachableHostSaysSo(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct{ url, host, why string }{
		{"https://" + closed, closed, "connection refused"},
	} {
		h, err := vcshost.New(vcshost.Host{Kind: vcshost.Gitea, HTTPURL: tc.url, Token: "t0k3n-never-shown"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.Branch(context.Background(), "acme/infra", "main")
		if err == nil {
			t.Fatalf("%s: no error", tc.url)
		}
		msg := err.Error()
		want := "could not reach " + tc.host + ": " + tc.why
		if !strings.Contains(msg, want) || strings.Contains(msg, "dial tcp") || strings.Contains(msg, `Get "`) || strings.Contains(msg, "t0k3n") {
			t.Errorf("%s: %q, want it to say %q, without Go's request", tc.url, msg, want)
		}
	}
}
