// Command bench measures remote runs end to end against an in-process
// Terrace server (SQLite, real HTTPS, the real terraform CLI) and prints
// figures measured in the same process:
//
//	(a) server-side run time, POST runs (auto-apply, configuration already
//	    uploaded) to the run's own applied-at (the client reads the run
//	    every 100ms, -poll), for a 20-resource configuration, against
//	    terraform init + plan -out + apply of that plan run locally; the
//	    same with a client reading every 10ms (-poll-heavy), whose reads
//	    compete with terraform for the cores; and the terraform CLI's own time for
//	    apply -auto-approve with a cloud block (bounded by its 1–3s polling);
//	(b) run creation to plan start, p50 and p99 over speculative runs;
//	(c) runs per minute for many workspaces with one run each;
//	(d) run triggers: a chain of workspaces (each applies, then the next)
//	    and a fan-out of one workspace to many: time from the origin's
//	    apply to the last dependent applied, and the overhead per hop
//	    beyond the runs themselves (a source applied → its dependent
//	    starts planning);
//	(e) reads: go-tfe Workspaces.Read by concurrent clients, Runs.List of
//	    one page by history size, resident memory;
//	(f) the job protocol's overhead: (c) with the in-process runner, then
//	    with two agents over HTTPS;
//	(g) the resident memory of a separately started `terrace server`
//	    process, idle and after (e)'s Workspaces.Read load against it.
//
//	go run ./tools/bench                    # everything (make bench)
//	go run ./tools/bench -only a -iterations 10
//	go run ./tools/bench -only d -chain 5 -fanout 10
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	tfe "github.com/hashicorp/go-tfe"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/server"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store/storetest"
	"github.com/terracehq/terrace/tools/internal/localserver"
)

const bigConfig = `
variable "gen" {
  type    = string
  default = "0"
}
resource "terraform_data" "r" {
  count = 20
  input = "${var.gen}-${count.index}"
}
`

const smallConfig = `
resource "terraform_data" "x" {
  input = "x"
}
`

type bench struct {
	srv     *server.Server
	c       *tfe.Client
	http    *http.Client
	srv0URL string // the server's base URL
	tf      string
	caFile  string
	host    string
	token   string
	tmp     string
	org     string
	seq     int
	// pool, when set, puts new workspaces in agent execution mode on it.
	pool string
	// steps sums the runner's job steps for (c).
	steps *stepSums
	// cpuProfile, when set, is where throughput writes a CPU profile.
	cpuProfile string
}

func main() {
	only := flag.String("only", "abcdefg", "which measurements to make: a, b, c, d, e, f, g")
	iterations := flag.Int("iterations", 10, "(a) runs measured on each side")
	cliIterations := flag.Int("cli-iterations", 3, "(a) terraform apply -auto-approve runs with a cloud block")
	poll := flag.Duration("poll", 100*time.Millisecond, "(a) how often the client reads the run while it runs; the ratio is of the run's own applied-at, so this only bounds when the bench learns the run is done")
	pollHeavy := flag.Duration("poll-heavy", 10*time.Millisecond, "(a) then measure the pairs again with a client reading the run this often (each read takes CPU from terraform on the same cores); 0: not")
	plans := flag.Int("plans", 100, "(b) speculative runs")
	workspaces := flag.Int("workspaces", 200, "(c, e) workspaces with one run each")
	chain := flag.Int("chain", 50, "(d) workspaces in the chain")
	fanout := flag.Int("fanout", 100, "(d) dependents of the fan-out's origin")
	concurrency := flag.Int("concurrency", 4, "the in-process runner's concurrency")
	verbose := flag.Bool("v", false, "server logs on stderr")
	st := flag.String("store", "sqlite", "sqlite or postgres (a throwaway PostgreSQL is started)")
	readers := flag.Int("readers", 32, "(e, g) concurrent Workspaces.Read clients")
	readFor := flag.Duration("read-for", 10*time.Second, "(e, g) how long the readers read")
	histories := flag.String("histories", "100,10000,100000", "(e) run history sizes for Runs.List")
	cpuProfile := flag.String("cpuprofile", "", "(e) write a CPU profile of the Workspaces.Read phase (server and clients) to this file")
	cpuProfileC := flag.String("cpuprofile-c", "", "(c) write a CPU profile of this process (server, runner, bench client; not terraform) during the runs to this file")
	memProfile := flag.String("memprofile", "", "(e) write the allocations of the Workspaces.Read phase (server and clients) to this file, and those before it to FILE.base (go tool pprof -base FILE.base FILE)")
	cpuProfileA := flag.String("cpuprofile-a", "", "(a) write a CPU profile of this process (server, runner, the polling client; not terraform) during the runs to this file")
	flag.Parse()
	var hs []int
	for _, f := range strings.Split(*histories, ",") {
		var n int
		if _, err := fmt.Sscan(f, &n); err != nil || n < 1 {
			fmt.Fprintln(os.Stderr, "bench: -histories wants positive numbers separated by commas")
			os.Exit(2)
		}
		hs = append(hs, n)
	}
	o := options{store: *st, readers: *readers, readFor: *readFor, histories: hs, cpuProfile: *cpuProfile, memProfile: *memProfile, cpuProfileC: *cpuProfileC, cpuProfileA: *cpuProfileA, poll: *poll, pollHeavy: *pollHeavy}
	if err := mainErr(*only, *iterations, *cliIterations, *plans, *workspaces, *chain, *fanout, *concurrency, *verbose, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// benchRateLimit is the server's per-token and per-address rate limit in
// the benchmarks: high enough never to bind.
const benchRateLimit = 1e6

// options are the flags of (e) and the store.
type options struct {
	store     string
	readers   int
	readFor   time.Duration
	histories []int
	// cpuProfile, when set, is where (e) writes a CPU profile of the reads;
	// memProfile where it writes their allocations.
	cpuProfile, memProfile string
	// cpuProfileC, when set, is where (c) writes a CPU profile; cpuProfileA
	// where (a) does.
	cpuProfileC, cpuProfileA string
	// poll is how often (a) reads the run through the API; pollHeavy how
	// often in its second set of pairs (0: none).
	poll, pollHeavy time.Duration
}

func mainErr(only string, iterations, cliIterations, plans, workspaces, chain, fanout, concurrency int, verbose bool, o options) error {
	tf, err := exec.LookPath("terraform")
	if err != nil {
		return errors.New("terraform is not on PATH")
	}
	tmp, err := os.MkdirTemp("", "terrace-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	steps := newStepRecorder(logger.Handler())
	logger = slog.New(steps)
	database := ""
	switch o.store {
	case "sqlite":
	case "postgres":
		dsn, stop, err := storetest.StartPostgres()
		if err != nil {
			return fmt.Errorf("starting PostgreSQL: %w", err)
		}
		defer stop()
		database = dsn
	default:
		return fmt.Errorf("-store is sqlite or postgres, not %q", o.store)
	}
	// The rate limits are raised out of the way: go-tfe paces itself at
	// two thirds of the advertised per-token limit (the default 1000/s
	// capped (e) at 660 Workspaces.Read a second whatever the server's
	// speed). The limiter still runs on every request.
	srv, err := localserver.Start(ctx, server.Config{
		DataDir: filepath.Join(tmp, "data"), Database: database, Logger: logger, RunnerConcurrency: concurrency, ScratchDir: tmp,
		RateLimitPerToken: benchRateLimit, RateLimitPerAddress: benchRateLimit,
	})
	if err != nil {
		return err
	}
	defer srv.Close()
	tr := srv.Transport
	tr.MaxIdleConnsPerHost = 64
	c, err := tfe.NewClient(&tfe.Config{Address: srv.BaseURL, Token: srv.SiteToken, HTTPClient: &http.Client{Transport: tr, Timeout: time.Minute}})
	if err != nil {
		return err
	}
	hc := &http.Client{Transport: tr, Timeout: time.Minute}
	b := &bench{srv: srv.Server, c: c, http: hc, srv0URL: srv.BaseURL, tf: tf, caFile: srv.CAFile, host: srv.Hostname, token: srv.SiteToken, tmp: tmp, org: "bench", steps: steps.s}
	if _, err := c.Organizations.Create(ctx, tfe.OrganizationCreateOptions{Name: tfe.String(b.org), Email: tfe.String("bench@example.test")}); err != nil {
		return err
	}
	fmt.Printf("terrace run benchmarks: %s, %s, runner concurrency %d, %d CPUs, load average %s\n", versionOf(tf), o.store, concurrency, runtime.NumCPU(), loadavg())
	if strings.Contains(only, "a") {
		stop := func() {}
		if o.cpuProfileA != "" {
			var err error
			if stop, err = startCPUProfile(o.cpuProfileA); err != nil {
				return err
			}
		}
		err := b.runTime(ctx, iterations, cliIterations, o.poll, o.pollHeavy, stop) // stops the profile after the runs
		stop()
		if err != nil {
			return fmt.Errorf("(a): %w", err)
		}
	}
	if strings.Contains(only, "b") {
		if err := b.queueLatency(ctx, plans); err != nil {
			return fmt.Errorf("(b): %w", err)
		}
	}
	if strings.Contains(only, "c") {
		b.cpuProfile = o.cpuProfileC
		perMin, err := b.throughput(ctx, "(c)", workspaces, concurrency)
		b.cpuProfile = ""
		if err != nil {
			return fmt.Errorf("(c): %w", err)
		}
		if _, err := b.localReference(ctx, max(2*concurrency, 8), concurrency); err != nil {
			return fmt.Errorf("(c): %w", err)
		}
		fmt.Printf("  (c) measured %.0f runs per minute through Terrace (target 400)\n", perMin)
	}
	if strings.Contains(only, "f") {
		if err := b.agents(ctx, workspaces, concurrency); err != nil {
			return fmt.Errorf("(f): %w", err)
		}
	}
	if strings.Contains(only, "d") {
		if err := b.triggers(ctx, chain, fanout, concurrency); err != nil {
			return fmt.Errorf("(d): %w", err)
		}
	}
	if strings.Contains(only, "e") {
		if err := b.reads(ctx, o.readers, o.readFor, o.histories, o.cpuProfile, o.memProfile); err != nil {
			return fmt.Errorf("(e): %w", err)
		}
	}
	if strings.Contains(only, "g") {
		if err := b.memory(ctx, o.readers, o.readFor); err != nil {
			return fmt.Errorf("(g): %w", err)
		}
	}
	fmt.Printf("load average at the end: %s\n", loadavg())
	return nil
}

// workspace creates a remote workspace with an uploaded configuration.
func (b *bench) workspace(ctx context.Context, config string) (*tfe.Workspace, *tfe.ConfigurationVersion, error) {
	b.seq++
	opts := tfe.WorkspaceCreateOptions{Name: tfe.String(fmt.Sprintf("ws-%d", b.seq)), ExecutionMode: tfe.String("remote")}
	if b.pool != "" {
		opts.ExecutionMode, opts.AgentPoolID = tfe.String("agent"), tfe.String(b.pool)
	}
	ws, err := b.c.Workspaces.Create(ctx, b.org, opts)
	if err != nil {
		return nil, nil, err
	}
	dir, err := os.MkdirTemp(b.tmp, "config-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644); err != nil {
		return nil, nil, err
	}
	archive, err := slug.Pack(dir)
	if err != nil {
		return nil, nil, err
	}
	cv, err := b.c.ConfigurationVersions.Create(ctx, ws.ID, tfe.ConfigurationVersionCreateOptions{AutoQueueRuns: tfe.Bool(false)})
	if err != nil {
		return nil, nil, err
	}
	if err := b.c.ConfigurationVersions.UploadTarGzip(ctx, cv.UploadURL, bytes.NewReader(archive)); err != nil {
		return nil, nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if cv, err = b.c.ConfigurationVersions.Read(ctx, cv.ID); err != nil {
			return nil, nil, err
		}
		if cv.Status == tfe.ConfigurationUploaded {
			return ws, cv, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("configuration version %s is %s after 30s", cv.ID, cv.Status)
		}
	}
}

// await polls a run through the API every interval until it is final.
// It returns the run and when each status was first seen.
func (b *bench) await(ctx context.Context, id string, interval time.Duration) (*tfe.Run, map[tfe.RunStatus]time.Time, error) {
	seen := map[tfe.RunStatus]time.Time{}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		r, err := b.c.Runs.Read(ctx, id)
		if err != nil {
			return nil, nil, err
		}
		if _, ok := seen[r.Status]; !ok {
			seen[r.Status] = time.Now()
		}
		switch r.Status {
		case tfe.RunApplied, tfe.RunPlannedAndFinished, tfe.RunErrored, tfe.RunCanceled, tfe.RunDiscarded:
			return r, seen, nil
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("run %s is %s after 5 minutes", id, r.Status)
		}
		time.Sleep(interval)
	}
}

// stored returns the run as the server stores it (microsecond timestamps).
func (b *bench) stored(ctx context.Context, id string) (*run.Run, error) {
	return b.srv.Runs.Get(auth.WithPrincipal(ctx, &auth.Principal{SiteAdmin: true}), id)
}

// pairs are (a)'s measurements: a run on the server, then the same work
// locally, n times.
type pairs struct {
	remote, local, atServer []time.Duration
	phases                  [][]time.Duration // queue, plan, plan→apply, apply, applied→plan JSON served
	steps                   [][]time.Duration // init, plan, apply, show -json
	lastRun                 string
}

// runPairs measures n pairs (after one that warms both sides up), the
// client reading each run every poll until it is final.
func (b *bench) runPairs(ctx context.Context, n int, poll time.Duration) (*pairs, error) {
	p := &pairs{}
	for i := -1; i < n; i++ {
		ws, cv, err := b.workspace(ctx, bigConfig)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		r, err := b.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, AutoApply: tfe.Bool(true),
			Variables: []*tfe.RunVariable{{Key: "gen", Value: fmt.Sprintf("%q", fmt.Sprint(i))}}})
		if err != nil {
			return nil, err
		}
		r, seen, err := b.await(ctx, r.ID, poll)
		if err != nil {
			return nil, err
		}
		if r.Status != tfe.RunApplied {
			return nil, fmt.Errorf("run %s ended %s", r.ID, r.Status)
		}
		sr, err := b.stored(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		ps, pf := sr.Plan.Timestamps["started-at"], sr.Plan.Timestamps["finished-at"]
		as, af := sr.Apply.Timestamps["started-at"], sr.Apply.Timestamps["finished-at"]
		applied := sr.Timestamps["applied-at"]
		// The plan's JSON is made after the run is applied: wait for it
		// (the read waits on the server) so that the local side does not
		// share the machine with it.
		if _, err := b.c.Plans.ReadJSONOutput(ctx, r.Plan.ID); err != nil {
			return nil, fmt.Errorf("the plan JSON of run %s: %w", r.ID, err)
		}
		js := time.Since(applied)

		ld, st, err := b.local(ctx, i)
		if err != nil {
			return nil, err
		}
		if i < 0 {
			continue
		}
		p.remote, p.local = append(p.remote, seen[tfe.RunApplied].Sub(start)), append(p.local, ld)
		p.atServer = append(p.atServer, applied.Sub(start))
		p.lastRun = r.ID
		p.phases = append(p.phases, []time.Duration{ps.Sub(start), pf.Sub(ps), as.Sub(pf), af.Sub(as), js})
		p.steps = append(p.steps, st)
	}
	return p, nil
}

// runTime is (a): the pairs once with a client that reads the run every
// poll (the figure the target is about), then, when heavy is set, again
// with one that reads it every heavy.
// endProfile ends -cpuprofile-a's profile once the first pairs are measured.
func (b *bench) runTime(ctx context.Context, n, cliN int, poll, heavy time.Duration, endProfile func()) error {
	fmt.Printf("\n(a) one run of a 20-resource terraform_data configuration (auto-apply), %d runs a side\n", n)
	p, err := b.runPairs(ctx, n, poll)
	if err != nil {
		return err
	}
	endProfile()
	// The server-side run is POST to the run's own applied-at: when the
	// server recorded the run applied, read back in microseconds. A
	// client's reads are not part of it, and their cost to a run that
	// shares two cores with them is the client's (the terraform CLI reads
	// every 1-3s); how often it reads only bounds when the bench learns
	// that the run is done. (c) measures its runs the same way.
	am, lm := median(p.atServer), median(p.local)
	verdict := "meets"
	if float64(am)/float64(lm) > 1.15 {
		verdict = "misses"
	}
	fmt.Printf("  server-side run, POST to the run's applied-at (the server's record; the client reads the run every %s): median %s  [%s]\n", poll, ms(am), list(p.atServer))
	fmt.Printf("  local init + plan -out + apply:                median %s  [%s]\n", ms(lm), list(p.local))
	fmt.Printf("  ratio server/local: %.2f (target <= 1.15: %s)\n", float64(am)/float64(lm), verdict)
	fmt.Printf("  POST to applied as the client saw it (with up to %s of poll latency): median %s, ratio to local %.2f\n", poll, ms(median(p.remote)), float64(median(p.remote))/float64(lm))
	col := func(rows [][]time.Duration, j int) time.Duration {
		var v []time.Duration
		for _, r := range rows {
			v = append(v, r[j])
		}
		return median(v)
	}
	fmt.Printf("  where the server's time goes (medians): POST to plan start %s, plan phase %s (init, plan, report),\n"+
		"    plan end to apply start %s, apply phase %s (apply, state upload, report);\n"+
		"    after that, off the run's time: applied to the plan's JSON served (show -json, upload) %s\n",
		ms(col(p.phases, 0)), ms(col(p.phases, 1)), ms(col(p.phases, 2)), ms(col(p.phases, 3)), ms(col(p.phases, 4)))
	fmt.Printf("  local steps (medians): init %s, plan %s, apply %s; show -json of the plan (not in the baseline) %s\n", ms(col(p.steps, 0)), ms(col(p.steps, 1)), ms(col(p.steps, 2)), ms(col(p.steps, 3)))
	var withShow []time.Duration
	for j, st := range p.steps {
		withShow = append(withShow, p.local[j]+st[3])
	}
	fmt.Printf("  for comparison, ratio against local work plus the show -json the server runs for the plan's JSON: %.2f\n", float64(am)/float64(median(withShow)))
	if heavy > 0 {
		// The same pairs with a client that reads the run every heavy:
		// each read costs this process (server and go-tfe) and PostgreSQL
		// CPU that terraform, on the same two cores, does not get.
		h, err := b.runPairs(ctx, n, heavy)
		if err != nil {
			return err
		}
		hl := median(h.local)
		fmt.Printf("  with a client reading the run every %s instead: POST to applied-at %s, ratio %.2f; POST to applied seen %s, ratio %.2f (local %s)\n",
			heavy, ms(median(h.atServer)), float64(median(h.atServer))/float64(hl), ms(median(h.remote)), float64(median(h.remote))/float64(hl), ms(hl))
		if err := b.readCost(ctx, h.lastRun, 2000, heavy); err != nil {
			return err
		}
	}

	if cliN <= 0 {
		return nil
	}
	// The CLI with a cloud block.
	var cli []time.Duration
	rc := filepath.Join(b.tmp, "cli.rc")
	if err := os.WriteFile(rc, []byte(fmt.Sprintf("credentials %q {\n  token = %q\n}\n", b.host, b.token)), 0o600); err != nil {
		return err
	}
	for i := -1; i < cliN; i++ {
		b.seq++
		dir, err := os.MkdirTemp(b.tmp, "cli-")
		if err != nil {
			return err
		}
		block := fmt.Sprintf("terraform {\n  cloud {\n    hostname = %q\n    organization = %q\n    workspaces { name = %q }\n  }\n}\n", b.host, b.org, fmt.Sprintf("cli-%d", b.seq))
		if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(block+bigConfig), 0o644); err != nil {
			return err
		}
		env := []string{"TF_CLI_CONFIG_FILE=" + rc, "SSL_CERT_FILE=" + b.caFile}
		if _, err := b.terraform(ctx, dir, env, "init", "-input=false"); err != nil {
			return err
		}
		d, err := b.terraform(ctx, dir, env, "apply", "-auto-approve", "-input=false")
		if err != nil {
			return err
		}
		os.RemoveAll(dir)
		if i >= 0 {
			cli = append(cli, d)
		}
	}
	fmt.Printf("  terraform apply -auto-approve with a cloud block (CLI end to end, polls every 1-3s): median %s  [%s]\n", ms(median(cli)), list(cli))
	return nil
}

// local runs the same work locally: init, plan -out, apply of that plan.
func (b *bench) local(ctx context.Context, i int) (time.Duration, []time.Duration, error) {
	dir, err := os.MkdirTemp(b.tmp, "local-")
	if err != nil {
		return 0, nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(bigConfig), 0o644); err != nil {
		return 0, nil, err
	}
	var steps []time.Duration
	for _, args := range [][]string{
		{"init", "-input=false", "-no-color"},
		{"plan", "-input=false", "-no-color", "-out=tfplan", "-var", fmt.Sprintf("gen=%d", i)},
		{"apply", "-input=false", "-no-color", "tfplan"},
	} {
		d, err := b.terraform(ctx, dir, nil, args...)
		if err != nil {
			return 0, nil, err
		}
		steps = append(steps, d)
	}
	var total time.Duration
	for _, s := range steps {
		total += s
	}
	// Not part of the baseline: what the server does on top of it to
	// serve the plan's JSON (json-output, counts), timed for comparison.
	d, err := b.terraform(ctx, dir, nil, "show", "-json", "-no-color", "tfplan")
	if err != nil {
		return 0, nil, err
	}
	return total, append(steps, d), nil
}

func (b *bench) terraform(ctx context.Context, dir string, env []string, args ...string) (time.Duration, error) {
	home := filepath.Join(dir, ".home")
	_ = os.MkdirAll(home, 0o700)
	cmd := exec.CommandContext(ctx, b.tf, args...)
	cmd.Dir = dir
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"}, env...)
	if !slices.ContainsFunc(env, func(s string) bool { return strings.HasPrefix(s, "TF_CLI_CONFIG_FILE=") }) {
		cmd.Env = append(cmd.Env, "TF_CLI_CONFIG_FILE="+filepath.Join(home, "none.rc"))
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	d := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return d, nil
}

// queueLatency is (b): speculative runs one after another on an idle
// runner, creation to plan start.
func (b *bench) queueLatency(ctx context.Context, n int) error {
	ws, cv, err := b.workspace(ctx, smallConfig)
	if err != nil {
		return err
	}
	var stored, seen []time.Duration
	for i := -1; i < n; i++ {
		start := time.Now()
		r, err := b.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: ws, ConfigurationVersion: cv, PlanOnly: tfe.Bool(true)})
		if err != nil {
			return err
		}
		r, at, err := b.await(ctx, r.ID, 10*time.Millisecond)
		if err != nil {
			return err
		}
		if r.Status != tfe.RunPlannedAndFinished {
			return fmt.Errorf("speculative run %s ended %s", r.ID, r.Status)
		}
		sr, err := b.stored(ctx, r.ID)
		if err != nil {
			return err
		}
		if i < 0 {
			continue
		}
		stored = append(stored, sr.Plan.Timestamps["started-at"].Sub(sr.CreatedAt))
		first := at[tfe.RunPlanning]
		for _, s := range []tfe.RunStatus{tfe.RunPlanned, tfe.RunPlannedAndFinished} {
			if first.IsZero() || !at[s].IsZero() && at[s].Before(first) {
				first = at[s]
			}
		}
		seen = append(seen, first.Sub(start))
	}
	fmt.Printf("\n(b) run creation to plan start, %d speculative runs one after another\n", n)
	p50, p99 := percentile(stored, 50), percentile(stored, 99)
	verdict := "meets"
	if p99 >= 200*time.Millisecond {
		verdict = "misses"
	}
	fmt.Printf("  stored (plan started-at - run created-at): p50 %s, p99 %s, max %s (target p99 < 200ms: %s)\n", ms(p50), ms(p99), ms(slices.Max(stored)), verdict)
	fmt.Printf("  seen by a client (POST sent to first status past plan_queued, 10ms polls): p50 %s, p99 %s\n", ms(percentile(seen, 50)), ms(percentile(seen, 99)))
	return nil
}

// throughput is (c): n workspaces with one auto-apply run each.
// throughput measures runs per minute: n workspaces, one auto-apply run each.
func (b *bench) throughput(ctx context.Context, label string, n, concurrency int) (float64, error) {
	type target struct {
		ws *tfe.Workspace
		cv *tfe.ConfigurationVersion
	}
	var targets []target
	for range n {
		ws, cv, err := b.workspace(ctx, smallConfig)
		if err != nil {
			return 0, err
		}
		targets = append(targets, target{ws, cv})
	}
	if b.cpuProfile != "" {
		stop, err := startCPUProfile(b.cpuProfile)
		if err != nil {
			return 0, err
		}
		defer stop()
	}
	b.steps.start()
	cpu0, q0 := cpuNow(), b.srv.DB.Queries()
	start := time.Now()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	sem := make(chan struct{}, 8)
	for i, tg := range targets {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			r, err := b.c.Runs.Create(ctx, tfe.RunCreateOptions{Workspace: tg.ws, ConfigurationVersion: tg.cv, AutoApply: tfe.Bool(true)})
			if err != nil {
				errs <- err
				return
			}
			ids[i] = r.ID
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	created := time.Since(start)
	// Poll cheaply (the poller must not slow the server down): walk the
	// runs in creation order and stop at the first one not done yet; all
	// are done when the walk reaches the end. The end is the last run's
	// own final timestamp, so the poll interval does not bias it (at 50ms
	// the poll cost a sixth of this process's CPU in a profile).
	pending := slices.Clone(ids)
	statuses := map[run.Status]int{}
	var last time.Time
	for len(pending) > 0 {
		if time.Since(start) > 30*time.Minute {
			return 0, fmt.Errorf("%d runs still not done after 30 minutes", len(pending))
		}
		time.Sleep(250 * time.Millisecond)
		for len(pending) > 0 {
			r, err := b.stored(ctx, pending[0])
			if err != nil {
				return 0, err
			}
			if !r.Status.Final() {
				break
			}
			statuses[r.Status]++
			at, ok := r.Timestamps[string(r.Status)+"-at"]
			if !ok {
				at = time.Now()
			}
			if at.After(last) {
				last = at
			}
			pending = pending[1:]
		}
	}
	d := last.Sub(start)
	// The jobs go on after their runs are final: each makes and uploads
	// its plan's JSON (phase plan-json). The CPU and step figures count
	// every run's jobs to their end.
	var queueWait time.Duration
	for _, id := range ids {
		for {
			r, err := b.stored(ctx, id)
			if err != nil {
				return 0, err
			}
			if !r.PlanJSONLater {
				if q, p := r.Timestamps["plan_queued-at"], r.Timestamps["planning-at"]; !q.IsZero() && !p.IsZero() {
					queueWait += p.Sub(q)
				}
				break
			}
			if time.Since(start) > 30*time.Minute {
				return 0, fmt.Errorf("the plan JSON of run %s is still not made after 30 minutes", id)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	// The last job reports its plan JSON, then logs its end: give its
	// worker a moment to reap terraform and log the job's last step.
	wall := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	cpu, queries := cpuNow().sub(cpu0), b.srv.DB.Queries()-q0
	stepTotals, stepCounts := b.steps.stop()
	perMin := float64(n) / d.Minutes()
	fmt.Printf("\n%s %d workspaces, one auto-apply run each (1 resource), runner concurrency %d, load average %s\n", label, n, concurrency, loadavg())
	fmt.Printf("  %d runs in %s (all created in %s): %.0f runs per minute; outcomes %v; every job ended (plan JSON made) after %s\n", n, d.Round(100*time.Millisecond), created.Round(time.Millisecond), perMin, statuses, wall.Round(100*time.Millisecond))
	fmt.Printf("  store queries: %.0f per run (the bench's own polling included)\n", float64(queries)/float64(n))
	printBreakdown(n, concurrency, runtime.NumCPU(), cpu, wall, stepTotals, stepCounts, queueWait)
	return perMin, nil
}

func median(d []time.Duration) time.Duration { return percentile(d, 50) }

// percentile is the nearest-rank percentile.
func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	k := (p*len(s) + 99) / 100
	return s[max(k-1, 0)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }

func list(d []time.Duration) string {
	var out []string
	for _, x := range d {
		out = append(out, ms(x))
	}
	return strings.Join(out, " ")
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func versionOf(tf string) string {
	out, _ := exec.Command(tf, "version").Output()
	line, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimSpace(line)
}
