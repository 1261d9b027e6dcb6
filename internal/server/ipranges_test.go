package server_test

import (
	"context"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// TestIPRanges: go-tfe's Meta.IPRanges reads the ranges the operator
// declared (normalized; egress for notifications, VCS and policies), an
// If-Modified-Since after the server's start gets 304 (go-tfe: empty
// lists), and a bad declaration stops the server from starting, naming
// the flag.
func TestIPRanges(t *testing.T) {
	ctx := context.Background()
	e := testenv.New(t, testenv.Options{Configure: func(c *server.Config) {
		c.APICIDRs = []string{"203.0.113.0/24", "2001:db8::/32"}
		c.EgressCIDRs = []string{"198.51.100.7", "192.0.2.130/25"}
	}})
	r, err := e.Client.Meta.IPRanges.Read(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	egress := []string{"198.51.100.7/32", "192.0.2.128/25"}
	if !reflect.DeepEqual(r.API, []string{"203.0.113.0/24", "2001:db8::/32"}) || !reflect.DeepEqual(r.Notifications, egress) ||
		!reflect.DeepEqual(r.VCS, egress) || !reflect.DeepEqual(r.Sentinel, egress) {
		t.Fatalf("ip ranges: %+v", r)
	}
	r, err = e.Client.Meta.IPRanges.Read(ctx, time.Now().Add(48*time.Hour).UTC().Format(http.TimeFormat))
	if err != nil || len(r.API)+len(r.Notifications)+len(r.VCS)+len(r.Sentinel) != 0 {
		t.Fatalf("ip ranges not modified since the day after tomorrow: %+v, %v (want empty)", r, err)
	}
	// No token needed; an older If-Modified-Since gets the ranges.
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+"/api/meta/ip-ranges", nil)
	req.Header.Set("If-Modified-Since", time.Now().Add(-48*time.Hour).UTC().Format(http.TimeFormat))
	res, err := e.HTTP.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Last-Modified") == "" {
		t.Fatalf("an anonymous read modified since the day before yesterday: %d, Last-Modified %q", res.StatusCode, res.Header.Get("Last-Modified"))
	}

	// Nothing declared: empty lists, not null.
	bare := testenv.New(t, testenv.Options{})
	if r, err := bare.Client.Meta.IPRanges.Read(ctx, ""); err != nil || r.API == nil || len(r.API) != 0 || r.VCS == nil {
		t.Fatalf("ip ranges of a server that declared none: %+v, %v", r, err)
	}

	_, err = server.New(ctx, server.Config{DataDir: t.TempDir(), Addr: "127.0.0.1:0", EgressCIDRs: []string{"10.0.0.0/33"}})
	if err == nil || !strings.Contains(err.Error(), "--egress-cidrs") || !strings.Contains(err.Error(), "10.0.0.0/33") {
		t.Fatalf("a bad egress CIDR: %v, want a refusal naming the flag and the value", err)
	}
}
