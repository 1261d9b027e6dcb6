package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	tfe "github.com/hashicorp/go-tfe"
)

// memory is (g): the resident memory of a `terrace server` started as its
// own process (built from this checkout, SQLite, default flags), read
// from /proc/PID/status: 5 s and a minute after it started (idle), after
// the Workspaces.Read load of (e) against it, and then after a few remote
// runs. Unlike (e)'s figures, the
// clients are not in the measured process. The Go heap figures from the
// server's /debug/pprof/heap (as the site admin) say how much of it the
// heap holds.
func (b *bench) memory(ctx context.Context, clients int, d time.Duration) error {
	fmt.Printf("\n(g) resident memory of a separate `terrace server` process (SQLite): idle, then after Workspaces.Read by %d clients for %s\n", clients, d)
	dir := filepath.Join(b.tmp, "memory")
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o700); err != nil {
		return err
	}
	bin := filepath.Join(dir, "terrace")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/terracehq/terrace/cmd/terrace").CombinedOutput(); err != nil {
		return fmt.Errorf("building terrace: %v\n%s", err, out)
	}
	// On the disk, as an installed binary is: the server drops its
	// binary's pages from the page cache once started (binpages), which
	// the kernel does only for pages written back.
	if err := syncFile(bin); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	addr := ln.Addr().String()
	ln.Close()
	data := filepath.Join(dir, "data")
	// The rate limits are out of the way as in (e), so that the reads are
	// as many as the server serves, not as go-tfe's pacing allows.
	limit := strconv.FormatFloat(benchRateLimit, 'f', -1, 64)
	cmd := exec.CommandContext(ctx, bin, "server", "--data-dir", data, "--addr", addr, "--log-level", "warn",
		"--rate-limit", limit, "--rate-limit-per-address", limit)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	_, port, _ := net.SplitHostPort(addr)
	url := "https://localhost:" + port
	hc, err := waitHealthy(ctx, url, data)
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
		return fmt.Errorf("%w\n%s", err, log)
	}
	tok, err := os.ReadFile(filepath.Join(data, "site-token"))
	if err != nil {
		return err
	}
	token := strings.TrimSpace(string(tok))
	// Idle twice: 5 s after the start, before the server releases the
	// binary's start-up pages (--release-binary-pages, after 10 s), and
	// after a minute, once the background loops have run their periods.
	started := time.Now()
	pid := cmd.Process.Pid
	for _, at := range []time.Duration{5 * time.Second, time.Minute} {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(started.Add(at))):
		}
		target := ""
		if at == time.Minute {
			target = " (target 35 MB)"
		}
		fmt.Printf("  idle, %s after the start: %s%s%s\n", at, procRSS(pid), target, heapSummary(ctx, hc, url, token))
	}

	c, err := tfe.NewClient(&tfe.Config{Address: url, Token: token, HTTPClient: hc})
	if err != nil {
		return err
	}
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String("mem"), Email: tfe.String("mem@example.test")}); err != nil {
		return err
	}
	if _, err := c.Workspaces.Create(ctx, "mem", tfe.WorkspaceCreateOptions{Name: tfe.String("w")}); err != nil {
		return err
	}
	srv0, self0 := procCPU(pid), cpuNow().self
	lat, failed := readLoad(ctx, c, "mem", "w", clients, d)
	srvCPU, selfCPU := procCPU(pid)-srv0, cpuNow().self-self0
	fmt.Printf("  Workspaces.Read against it (site admin token): %.0f requests/s, p99 %s, %d failed\n", float64(len(lat))/d.Seconds(), fmtDur(percentile(lat, 99)), failed)
	if len(lat) > 0 {
		// Both share the machine's cores: what the clients spend is CPU
		// the server cannot have, so (e)'s throughput is bounded by both.
		n := time.Duration(len(lat))
		fmt.Printf("  CPU time per read: the server %s, the go-tfe clients (this process) %s\n", fmtDur(srvCPU/n), fmtDur(selfCPU/n))
	}
	fmt.Printf("  after the reads: %s (target 50 MB)%s\n", procRSS(pid), heapSummary(ctx, hc, url, token))

	// Not a target: what the work a server does besides reading maps
	// (the runner, terraform's reports, state), after the figures above.
	const runs = 5
	other := &bench{c: c, org: "mem", tmp: dir}
	for range runs {
		ws, cv, err := other.workspace(ctx, bigConfig)
		if err != nil {
			return err
		}
		r, err := c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true)})
		if err != nil {
			return err
		}
		if r, _, err = other.await(ctx, r.ID, 100*time.Millisecond); err != nil {
			return err
		} else if r.Status != tfe.RunApplied {
			return fmt.Errorf("run %s is %s, not applied", r.ID, r.Status)
		}
	}
	fmt.Printf("  after %d remote runs besides (not a target): %s%s\n", runs, procRSS(pid), heapSummary(ctx, hc, url, token))
	return nil
}

// waitHealthy waits for a server started on dataDir to answer /healthz
// over TLS with its own CA, and returns an HTTP client that trusts it.
func waitHealthy(ctx context.Context, url, dataDir string) (*http.Client, error) {
	var hc *http.Client
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if hc == nil {
			pem, err := os.ReadFile(filepath.Join(dataDir, "tls", "ca.pem"))
			if err != nil {
				continue
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tr := http.DefaultTransport.(*http.Transport).Clone()
			tr.TLSClientConfig = &tls.Config{RootCAs: pool}
			tr.MaxIdleConnsPerHost = 64
			hc = &http.Client{Transport: tr, Timeout: time.Minute}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/healthz", nil)
		if err != nil {
			return nil, err
		}
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return hc, nil
			}
		}
	}
	return nil, fmt.Errorf("terrace at %s did not become healthy in 30s", url)
}

// readLoad reads one workspace with go-tfe from clients goroutines for d
// and returns the latencies of the reads that succeeded and how many
// failed.
func readLoad(ctx context.Context, c *tfe.Client, org, name string, clients int, d time.Duration) ([]time.Duration, int) {
	var mu sync.Mutex
	var lat []time.Duration
	var failed int
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for time.Now().Before(stop) {
				t0 := time.Now()
				if _, err := c.Workspaces.Read(ctx, org, name); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat, failed = append(lat, mine...), failed+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	return lat, failed
}

// procRSS is a process's resident set size from /proc/PID/status (VmRSS),
// with its anonymous and file-backed parts (the binary's own pages are
// file-backed: the kernel can drop and reread them), and how many of its
// page faults so far read the disk (/proc/PID/stat's majflt: the binary's
// pages read again after the server dropped them from the page cache).
func procRSS(pid int) string {
	f := procStatus(strconv.Itoa(pid))
	if f == nil {
		return "unknown"
	}
	major := "unknown"
	if st := procStat(pid); len(st) > 9 {
		major = st[9] // majflt
	}
	return fmt.Sprintf("VmRSS %s (anonymous %s, file-backed %s, shared memory %s), %s major faults", f["VmRSS"], f["RssAnon"], f["RssFile"], f["RssShmem"], major)
}

// procStatus reads /proc/PROC/status (PROC a PID or "self") into its
// fields; nil when it cannot be read.
func procStatus(proc string) map[string]string {
	data, err := os.ReadFile("/proc/" + proc + "/status")
	if err != nil {
		return nil
	}
	f := map[string]string{}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			f[k] = strings.TrimSpace(v)
		}
	}
	return f
}

// heapSummary reads the Go runtime's memory figures from the server's
// /debug/pprof/heap?debug=1 (site admins only): the heap in use, the
// heap's free spans and how much of them the runtime has returned to the
// system (idle minus returned is free heap still resident), the goroutine
// stacks, the GC's metadata, and all the runtime has taken from the system.
func heapSummary(ctx context.Context, hc *http.Client, url, token string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/debug/pprof/heap?debug=1", nil)
	if err != nil {
		return ""
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return fmt.Sprintf("; /debug/pprof/heap: %s", resp.Status)
	}
	want := map[string]string{"HeapInuse": "", "HeapIdle": "", "HeapReleased": "", "Stack": "", "GCSys": "", "Sys": ""}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "# "), " = ")
		if _, known := want[k]; ok && known {
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil {
				want[k] = fmt.Sprintf("%.1f MB", float64(n)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("; Go heap in use %s, idle %s (of which returned to the system %s), stacks %s, GC metadata %s, taken from the system %s",
		want["HeapInuse"], want["HeapIdle"], want["HeapReleased"], want["Stack"], want["GCSys"], want["Sys"])
}

// syncFile writes the file at path to the disk.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
