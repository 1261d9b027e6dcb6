package ui_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/configversion"
	"github.com/terracehq/terrace/internal/organization"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/workspace"
)

// BenchmarkWorkspaceListTTFB measures the time to the first byte of the
// workspace list page of an organization with 1,000 workspaces and 10,000
// runs, over HTTPS (target: under 50 ms). The server is built but not
// started, so that no runner picks the runs up; they stay queued.
func BenchmarkWorkspaceListTTFB(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := server.New(ctx, server.Config{DataDir: dir, Addr: "127.0.0.1:0", Hostname: "localhost:8443",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	p, err := s.Auth.Authenticate(ctx, s.SiteToken)
	if err != nil {
		b.Fatal(err)
	}
	sctx := authz.WithModel(auth.WithPrincipal(ctx, p), s.Authz)
	if _, err := s.Orgs.Create(sctx, organization.CreateOptions{Name: "big", Email: "ops@big.test"}); err != nil {
		b.Fatal(err)
	}
	src := b.TempDir()
	if err := os.WriteFile(filepath.Join(src, "main.tf"), []byte(`resource "terraform_data" "x" {}`), 0o644); err != nil {
		b.Fatal(err)
	}
	archive, err := slug.Pack(src)
	if err != nil {
		b.Fatal(err)
	}
	const workspaces, runsEach = 1000, 10
	f := false
	for i := range workspaces {
		name := fmt.Sprintf("ws-%04d", i)
		ws, err := s.Workspaces.Create(sctx, "big", workspace.Options{Name: &name})
		if err != nil {
			b.Fatal(err)
		}
		cv, err := s.ConfigVersions.CreateFromArchive(sctx, ws.ID, archive, configversion.CreateOptions{AutoQueueRuns: &f})
		if err != nil {
			b.Fatal(err)
		}
		for range runsEach {
			if _, err := s.Runs.Create(sctx, run.CreateOptions{WorkspaceID: ws.ID, ConfigurationVersionID: cv.ID}); err != nil {
				b.Fatal(err)
			}
		}
	}
	srv := httptest.NewUnstartedServer(s.Handler())
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	client.Transport.(*http.Transport).TLSClientConfig = &tls.Config{InsecureSkipVerify: true}
	get := func() time.Duration {
		req, _ := http.NewRequest("GET", srv.URL+"/app/big/workspaces", nil)
		req.Header.Set("Authorization", "Bearer "+s.SiteToken)
		var start, first time.Time
		req = req.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
			WroteRequest:         func(httptrace.WroteRequestInfo) { start = time.Now() },
			GotFirstResponseByte: func() { first = time.Now() },
		}))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n < 50*100 {
			b.Fatalf("workspace list: %d, %d bytes", resp.StatusCode, n)
		}
		return first.Sub(start)
	}
	get() // warm the connection and caches
	var total time.Duration
	b.ResetTimer()
	for b.Loop() {
		total += get()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms-ttfb")
}
