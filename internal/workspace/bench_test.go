package workspace_test

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/testenv"
)

// readConcurrency is the number of clients reading at once (the Core I
// issue's "workspace reads at concurrency 32").
const readConcurrency = 32

// BenchmarkWorkspaceReadParallel measures GET /api/v2/workspaces/{id} over
// real HTTPS with keep-alive, 32 clients at once, against an organization
// of 50 workspaces, on each store. ns/op is wall time per read across all
// clients; reads/s is the throughput.
func BenchmarkWorkspaceReadParallel(b *testing.B) {
	for _, st := range testenv.Stores {
		b.Run(st, func(b *testing.B) {
			// The rate limits out of the way: the reads are as many as
			// the server serves (the default 1,000/s per token answers
			// the rest with 429).
			e := testenv.New(b, testenv.Options{Store: st, Configure: func(c *server.Config) { c.RateLimitPerToken, c.RateLimitPerAddress = 1e6, 1e6 }})
			ids := seedWorkspaces(b, e, 50)
			tr := e.HTTP.Transport.(*http.Transport).Clone()
			tr.MaxIdleConns, tr.MaxIdleConnsPerHost = readConcurrency*2, readConcurrency*2
			hc := &http.Client{Transport: tr}
			defer tr.CloseIdleConnections()
			get := func(id string) error {
				req, err := http.NewRequest(http.MethodGet, e.URL+"/api/v2/workspaces/"+id, nil)
				if err != nil {
					return err
				}
				req.Header.Set("Authorization", "Bearer "+e.Token)
				req.Header.Set("Accept", "application/vnd.api+json")
				resp, err := hc.Do(req)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err == nil && resp.StatusCode != http.StatusOK {
					err = fmt.Errorf("GET workspace %s: %s", id, resp.Status)
				}
				return err
			}
			if err := get(ids[0]); err != nil {
				b.Fatal(err)
			}
			b.SetParallelism((readConcurrency + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var next atomic.Int64
			var failed atomic.Pointer[error]
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := get(ids[next.Add(1)%int64(len(ids))]); err != nil {
						failed.CompareAndSwap(nil, &err)
					}
				}
			})
			elapsed := time.Since(start)
			b.StopTimer()
			if err := failed.Load(); err != nil {
				b.Fatal(*err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "reads/s")
		})
	}
}

// seedWorkspaces makes an organization holding n workspaces with a tag
// each, and returns their IDs.
func seedWorkspaces(b *testing.B, e *testenv.Env, n int) []string {
	b.Helper()
	c := e.Client
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("bench"), Email: tfe.String("ops@bench.test")}); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, 0, n)
	for i := range n {
		w, err := c.Workspaces.Create(ctx, "bench", tfe.WorkspaceCreateOptions{
			Name: tfe.String(fmt.Sprintf("ws-%02d", i)),
			Tags: []*tfe.Tag{{Name: "bench"}},
		})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, w.ID)
	}
	return ids
}
