// Command load runs many go-tfe clients at once against one in-process
// Terrace server (real HTTPS, the real terraform CLI, SQLite or a
// throwaway PostgreSQL) for a fixed time, mixing reads, speculative run
// creation and state uploads, then waits for every run to end. It fails
// on any 5xx answer or a run that does not end, and prints p50/p99 per
// operation.
//
//	go run ./tools/load -clients 200 -duration 60s -store sqlite
//	go run ./tools/load -clients 200 -duration 60s -store postgres
//
// make load (run by .ci/run) runs both stores with -max-pending-runs 8, so
// the wait for the last runs after the clients stop stays short.
package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/tools/internal/localserver"
)

const config = `
resource "terraform_data" "x" {
  input = "x"
}
`

func main() {
	clients := flag.Int("clients", 200, "concurrent go-tfe clients")
	duration := flag.Duration("duration", 60*time.Second, "how long the clients send requests")
	st := flag.String("store", "sqlite", "sqlite or postgres (a throwaway server is started)")
	concurrency := flag.Int("runner-concurrency", 4, "the in-process runner's concurrency")
	maxRuns := flag.Int("max-pending-runs", 0, "at most this many runs unfinished at once (0: one per client); bounds the wait for every run to end")
	flag.Parse()
	if err := run(*clients, *duration, *st, *concurrency, *maxRuns); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// counting counts answers with a 5xx status.
type counting struct {
	next     http.RoundTripper
	fives    atomic.Int64
	limited  atomic.Int64
	requests atomic.Int64
}

func (c *counting) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.next.RoundTrip(r)
	c.requests.Add(1)
	if err == nil && res.StatusCode >= 500 {
		c.fives.Add(1)
	}
	if err == nil && res.StatusCode == http.StatusTooManyRequests {
		c.limited.Add(1)
	}
	return res, err
}

type timings struct {
	mu sync.Mutex
	m  map[string][]time.Duration
}

func (t *timings) add(op string, d time.Duration) {
	t.mu.Lock()
	t.m[op] = append(t.m[op], d)
	t.mu.Unlock()
}

func run(clients int, duration time.Duration, st string, concurrency, maxRuns int) error {
	tmp, err := os.MkdirTemp("", "terrace-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// What the load needs from the machine, said up front rather than
	// as runs that all error after the clients stopped.
	if _, err := (&engine.Finder{}).Find(context.Background(), "latest"); err != nil {
		return fmt.Errorf("the load's runs need terraform: %w (.ci/run checks for it; terraform 1.11.4 is what the tests use)", err)
	}
	database := filepath.Join(tmp, "terrace.db")
	if st == "postgres" {
		dsn, stop, err := storetest.StartPostgres()
		if err != nil {
			return fmt.Errorf("starting PostgreSQL for -store postgres: %w (put the PostgreSQL 15 server binaries on PATH, as .ci/run does: apt-get install postgresql-15, then PATH=/usr/lib/postgresql/15/bin:$PATH)", err)
		}
		defer stop()
		database = dsn
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := localserver.Start(ctx, server.Config{
		DataDir: filepath.Join(tmp, "data"), Database: database,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), RunnerConcurrency: concurrency, ScratchDir: tmp,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	tr := srv.Transport
	tr.MaxIdleConnsPerHost = clients
	count := &counting{next: tr}
	newClient := func() (*tfe.Client, error) {
		return tfe.NewClient(&tfe.Config{Address: srv.BaseURL, Token: srv.SiteToken, HTTPClient: &http.Client{Transport: count, Timeout: 2 * time.Minute}})
	}
	admin, err := newClient()
	if err != nil {
		return err
	}
	const org = "load"
	if _, err := admin.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(org), Email: tfe.String("load@example.test")}); err != nil {
		return err
	}
	dir := filepath.Join(tmp, "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		return err
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		return err
	}

	if maxRuns <= 0 {
		maxRuns = clients
	}
	fmt.Printf("load: %d go-tfe clients for %s, %s, runner concurrency %d, at most %d runs pending, %d CPUs\n", clients, duration, st, concurrency, maxRuns, runtime.NumCPU())
	// pending holds the runs created and not yet seen ending (a watcher
	// reads them); reserved counts creations under way.
	var pmu sync.Mutex
	pending := map[string]bool{}
	reserved := 0
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for tick := time.NewTicker(500 * time.Millisecond); ; {
			select {
			case <-watchCtx.Done():
				tick.Stop()
				return
			case <-tick.C:
			}
			pmu.Lock()
			ids := make([]string, 0, len(pending))
			for id := range pending {
				ids = append(ids, id)
			}
			pmu.Unlock()
			for _, id := range ids {
				if r, err := admin.Runs.Read(watchCtx, id); err == nil && final(r.Status) {
					pmu.Lock()
					delete(pending, id)
					pmu.Unlock()
				}
			}
		}
	}()
	tm := &timings{m: map[string][]time.Duration{}}
	var runIDs sync.Map
	var failures atomic.Int64
	var firstErr atomic.Pointer[error]
	fail := func(err error) {
		failures.Add(1)
		firstErr.CompareAndSwap(nil, &err)
	}
	end := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := newClient()
			if err != nil {
				fail(err)
				return
			}
			timed := func(op string, fn func() error) error {
				start := time.Now()
				err := fn()
				tm.add(op, time.Since(start))
				if err != nil {
					fail(fmt.Errorf("%s: %w", op, err))
				}
				return err
			}
			var ws *tfe.Workspace
			if timed("create workspace", func() (err error) {
				ws, err = c.Workspaces.Create(ctx, org, tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("ws-%d", i))})
				return err
			}) != nil {
				return
			}
			var cv *tfe.ConfigurationVersion
			if timed("upload configuration", func() (err error) {
				if cv, err = c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false), Speculative: tfe.Bool(true)}); err != nil {
					return err
				}
				if err := c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
					return err
				}
				for deadline := time.Now().Add(time.Minute); cv.Status != tfe.ConfigurationUploaded; time.Sleep(50 * time.Millisecond) {
					if cv, err = c.ConfigurationVersions.Read(ctx, cv.ID); err != nil {
						return err
					}
					if time.Now().After(deadline) {
						return fmt.Errorf("configuration version %s is %s after a minute", cv.ID, cv.Status)
					}
				}
				return nil
			}) != nil {
				return
			}
			serial := int64(0)
			var lastRun string
			for time.Now().Before(end) {
				switch n := rand.IntN(10); {
				case n < 6:
					_ = timed("read workspace", func() error { _, err := c.Workspaces.Read(ctx, org, ws.Name); return err })
				case n < 8:
					_ = timed("list runs", func() error { _, err := c.Runs.List(ctx, ws.ID, nil); return err })
				case n < 9:
					serial++
					state := fmt.Appendf(nil, `{"version":4,"terraform_version":"1.11.4","serial":%d,"lineage":"load-%d","outputs":{},"resources":[]}`, serial, i)
					sum := md5.Sum(state)
					_ = timed("upload state", func() error {
						if _, err := c.Workspaces.Lock(ctx, ws.ID, tfe.WorkspaceLockOptions{}); err != nil {
							return err
						}
						_, err := c.StateVersions.Upload(ctx, ws.ID, tfe.StateVersionUploadOptions{
							StateVersionCreateOptions: tfe.StateVersionCreateOptions{Serial: tfe.Int64(serial), MD5: tfe.String(hex.EncodeToString(sum[:])), Lineage: tfe.String(fmt.Sprintf("load-%d", i))},
							RawState:                  state,
						})
						if _, uerr := c.Workspaces.Unlock(ctx, ws.ID); err == nil {
							err = uerr
						}
						return err
					})
				default:
					// One speculative run outstanding per client.
					// One run outstanding per client, maxRuns in all.
					pmu.Lock()
					skip := pending[lastRun] || len(pending)+reserved >= maxRuns
					if !skip {
						reserved++
					}
					pmu.Unlock()
					if skip {
						_ = timed("read workspace", func() error { _, err := c.Workspaces.Read(ctx, org, ws.Name); return err })
						continue
					}
					_ = timed("create run", func() error {
						r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv})
						pmu.Lock()
						reserved--
						if err == nil {
							lastRun = r.ID
							pending[r.ID] = true
							runIDs.Store(r.ID, true)
						}
						pmu.Unlock()
						return err
					})
				}
			}
		}()
	}
	wg.Wait()
	sent := time.Now()
	// Every run must end.
	var runs, unfinished int
	var ids []string
	runIDs.Range(func(k, _ any) bool { ids = append(ids, k.(string)); return true })
	for _, id := range ids {
		runs++
		for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
			r, err := admin.Runs.Read(ctx, id)
			if err == nil && final(r.Status) {
				if r.Status != tfe.RunPlannedAndFinished {
					fail(fmt.Errorf("run %s ended %s", id, r.Status))
				}
				break
			}
			if time.Now().After(deadline) {
				unfinished++
				break
			}
		}
	}
	fmt.Printf("%d requests, %d answered 5xx, %d answered 429 (retried by go-tfe), %d client errors; %d runs, %d not ended (all ended %s after the clients stopped)\n",
		count.requests.Load(), count.fives.Load(), count.limited.Load(), failures.Load(), runs, unfinished, time.Since(sent).Round(time.Second))
	ops := make([]string, 0, len(tm.m))
	for op := range tm.m {
		ops = append(ops, op)
	}
	slices.Sort(ops)
	for _, op := range ops {
		d := tm.m[op]
		slices.Sort(d)
		fmt.Printf("  %-22s n=%-6d p50 %-8s p99 %-8s max %s\n", op, len(d), pct(d, 50), pct(d, 99), d[len(d)-1].Round(time.Millisecond))
	}
	switch {
	case count.fives.Load() > 0:
		return fmt.Errorf("%d answers were 5xx", count.fives.Load())
	case unfinished > 0:
		return fmt.Errorf("%d runs did not end", unfinished)
	case failures.Load() > 0:
		return fmt.Errorf("%d operations failed, the first: %w", failures.Load(), *firstErr.Load())
	}
	return nil
}

func final(s tfe.RunStatus) bool {
	switch s {
	case tfe.RunApplied, tfe.RunPlannedAndFinished, tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded:
		return true
	}
	return false
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)].Round(time.Millisecond)
}
