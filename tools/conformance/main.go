// Command conformance runs go-tfe's own integration tests against a real
// Terrace server: the tests on conformance/allow.txt must pass, and every
// test of the groups on conformance/groups.txt must be either allowed or
// excluded with a reason in conformance/excluded.txt.
//
//	go run ./tools/conformance               # everything allowed, on SQLite
//	go run ./tools/conformance -run Projects # a subset
//	go run ./tools/conformance -list         # the plan, checked, without running
//	go run ./tools/conformance -stores sqlite,postgres
//
// go-tfe comes from the Go module proxy (go mod download) and its test
// binary is built once into .cache/go-tfe-<version>/. Each test runs in its
// own process against one server per store (a test marked own-server in
// allow.txt, against a server of its own). The last line of the output is
// "N passed, N failed"; the exit status is non-zero when any test failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/mailsink"
)

func main() {
	os.Exit(run())
}

type options struct {
	run      string
	excluded bool
	list     bool
	stores   string
	parallel int
	timeout  time.Duration
	verbose  bool
	keep     bool
	cache    string
	planDir  string
}

func run() int {
	var o options
	flag.StringVar(&o.run, "run", "", "only run the allow-listed tests matching this regular expression")
	flag.BoolVar(&o.excluded, "excluded", false, "also run the excluded tests (with -run, to find those that pass now); they do not count")
	flag.BoolVar(&o.list, "list", false, "check the plan against go-tfe's tests and print it, without running anything")
	flag.StringVar(&o.stores, "stores", "sqlite", "comma-separated stores to run against: sqlite, postgres")
	flag.IntVar(&o.parallel, "parallel", 2, "tests run at the same time")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "time limit of one test")
	flag.BoolVar(&o.verbose, "v", false, "print the whole output of every test")
	flag.BoolVar(&o.keep, "keep", false, "keep the data dirs, server logs and test outputs")
	flag.StringVar(&o.cache, "cache", "", "cache folder for go-tfe's source and test binary (default <repo>/.cache)")
	flag.StringVar(&o.planDir, "plan", "", "folder with groups.txt, allow.txt and excluded.txt (default <repo>/conformance)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "conformance: unexpected arguments %q\n", flag.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	code, err := conform(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		if code == 0 {
			code = 2
		}
	}
	return code
}

func logf(format string, args ...any) {
	fmt.Printf("conformance: "+format+"\n", args...)
}

func conform(ctx context.Context, o options) (int, error) {
	start := time.Now()
	repo, err := repoRoot()
	if err != nil {
		return 2, err
	}
	if o.cache == "" {
		o.cache = filepath.Join(repo, ".cache")
	}
	if o.planDir == "" {
		o.planDir = filepath.Join(repo, "conformance")
	}
	var filter *regexp.Regexp
	if o.run != "" {
		if filter, err = regexp.Compile(o.run); err != nil {
			return 2, fmt.Errorf("-run: %w", err)
		}
	}
	stores := strings.Split(o.stores, ",")
	for _, s := range stores {
		if s != "sqlite" && s != "postgres" {
			return 2, fmt.Errorf("-stores: unknown store %q (want sqlite, postgres)", s)
		}
	}
	if o.parallel < 1 {
		o.parallel = 1
	}

	plan, err := LoadPlan(o.planDir)
	if err != nil {
		return 2, fmt.Errorf("reading the plan in %s:\n%w", o.planDir, err)
	}
	g, err := obtainGoTFE(ctx, repo, o.cache, logf)
	if err != nil {
		return 2, err
	}
	available, err := g.List(ctx)
	if err != nil {
		return 2, err
	}
	if problems := plan.Check(available); len(problems) > 0 {
		return 2, fmt.Errorf("the plan in %s does not match go-tfe %s's tests:\n  %s", o.planDir, goTFEVersion, strings.Join(problems, "\n  "))
	}
	selected := plan.Select(filter, o.excluded)
	if o.list {
		printPlan(plan, selected, stores)
		return 0, nil
	}
	if len(selected) == 0 {
		return 2, fmt.Errorf("no allow-listed test matches -run %q", o.run)
	}

	work, err := os.MkdirTemp("", "terrace-conformance-")
	if err != nil {
		return 2, err
	}
	bin, err := buildTerrace(ctx, repo, work)
	if err != nil {
		os.RemoveAll(work)
		return 2, err
	}
	runCLIConfig, err := writeRunCLIConfig(work)
	if err != nil {
		os.RemoveAll(work)
		return 2, err
	}
	logf("go-tfe %s, %d tests on %s, %d at a time; env %s", goTFEVersion, len(selected), strings.Join(stores, " and "), o.parallel, strings.Join(Settings, " "))

	// The tests that share a server, then each that needs its own
	// (own-server in allow.txt), on a server started for it.
	var shared, own []Entry
	for _, e := range selected {
		if e.OwnServer {
			own = append(own, e)
		} else {
			shared = append(shared, e)
		}
	}
	var results []Result
	var runErr error
	run := func(dir, store string, tests []Entry) {
		rs, err := runStore(ctx, o, g, bin, runCLIConfig, dir, store, tests)
		results = append(results, rs...)
		if err != nil {
			runErr = errors.Join(runErr, fmt.Errorf("%s: %w", store, err))
		}
	}
	for _, store := range stores {
		if len(shared) > 0 {
			run(work, store, shared)
		}
		for _, e := range own {
			if ctx.Err() != nil {
				break
			}
			run(filepath.Join(work, "own-server", e.Name), store, []Entry{e})
		}
		if ctx.Err() != nil {
			break
		}
	}

	passed, failed := 0, 0
	var failures, movable []string
	counted := 0
	for _, r := range results {
		if r.Excluded {
			if r.Pass {
				movable = append(movable, r.Store+" "+r.Name)
			}
			continue
		}
		counted++
		if r.Pass {
			passed++
		} else {
			failed++
			failures = append(failures, r.Store+" "+r.Name)
		}
	}
	if runErr != nil {
		fmt.Println(runErr)
	}
	if o.excluded {
		fmt.Printf("excluded tests that pass now (move them to allow.txt): %d\n", len(movable))
		for _, m := range movable {
			fmt.Println("  " + m)
		}
	}
	if len(failures) > 0 {
		fmt.Printf("failed: %s\n", strings.Join(failures, ", "))
	}
	keep := o.keep || failed > 0 || runErr != nil
	if keep {
		fmt.Printf("server logs and test outputs are in %s\n", work)
	} else {
		os.RemoveAll(work)
	}
	fmt.Printf("took %s\n", time.Since(start).Round(time.Second))
	allowed := 0
	for _, e := range selected {
		if !e.Excluded {
			allowed++
		}
	}
	missing := allowed*len(stores) - counted // not run: interrupted, or the server failed to start
	failed += missing
	fmt.Printf("%d passed, %d failed\n", passed, failed)
	if failed > 0 || runErr != nil {
		return 1, nil
	}
	return 0, nil
}

// runStore starts a server on one store and runs the tests against it,
// o.parallel at a time, printing each result as it comes.
func runStore(ctx context.Context, o options, g *GoTFE, bin, runCLIConfig, work, store string, tests []Entry) ([]Result, error) {
	database := ""
	if store == "postgres" {
		dsn, drop, err := postgresDatabase(ctx)
		if err != nil {
			return nil, err
		}
		defer drop()
		database = dsn
	}
	// A real SMTP server, so that email notification configurations can
	// be enabled (go-tfe's update tests do).
	mail, err := mailsink.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the local SMTP server: %w", err)
	}
	defer mail.Close()
	srv, err := startTerrace(ctx, bin, filepath.Join(work, store), database, runCLIConfig, mail.Addr)
	if err != nil {
		return nil, err
	}
	logf("terrace on %s is up at %s (log %s)", store, srv.URL, srv.LogFile)
	rctx, stopReceiver := context.WithCancel(ctx)
	defer stopReceiver()
	recv, err := startReceiver(rctx, srv.CAFile, logf)
	if err != nil {
		_ = srv.Stop()
		return nil, fmt.Errorf("starting the local HTTP receiver: %w", err)
	}
	srv.ReceiverURL = recv.URL

	var (
		mu      sync.Mutex
		results []Result
		next    = make(chan Entry)
		wg      sync.WaitGroup
		crashed bool
	)
	for range o.parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e := range next {
				var r Result
				if !srv.Alive() {
					r = Result{Store: store, Name: e.Name, Excluded: e.Excluded, Why: "terrace is no longer running"}
				} else {
					r = runTest(ctx, g, srv, store, e, o.timeout)
					if !r.Pass && !srv.Alive() {
						r.Why += "; terrace stopped during the test"
					}
				}
				path := saveOutput(work, r)
				mu.Lock()
				results = append(results, r)
				fmt.Print(formatResult(r, o.verbose, path))
				if !srv.Alive() && !crashed {
					crashed = true
					fmt.Printf("terrace on %s has stopped; the end of its log:\n%s\n", store, tail(readFile(srv.LogFile), 30))
				}
				mu.Unlock()
			}
		}()
	}
	for _, e := range tests {
		select {
		case next <- e:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
	}
	close(next)
	wg.Wait()
	err = srv.Stop()
	if crashed {
		err = errors.Join(errors.New("terrace crashed during the run"), err)
	}
	if ctx.Err() != nil {
		err = errors.Join(err, ctx.Err())
	}
	return results, err
}

func printPlan(p *Plan, selected []Entry, stores []string) {
	fmt.Printf("go-tfe %s against terrace on %s\n", goTFEVersion, strings.Join(stores, " and "))
	fmt.Printf("environment: TFE_ADDRESS, TFE_TOKEN (site token), SSL_CERT_FILE, TFE_ADMIN_{%s}_TOKEN (site token), %s\n",
		strings.Join(adminRoles, ","), strings.Join(Settings, " "))
	fmt.Printf("covered groups: %s\n", strings.Join(p.Groups, " "))
	fmt.Printf("\n%d tests selected (%d allow-listed in all):\n", len(selected), len(p.Allow))
	for _, e := range selected {
		note := strings.Join(e.Env, " ")
		if e.OwnServer {
			note = strings.TrimSpace(ownServerWord + " " + note)
		}
		if e.Excluded {
			note = "(excluded, does not count: " + e.Reason + ")"
		}
		fmt.Printf("  %s %s\n", e.Name, note)
	}
	fmt.Printf("\n%d excluded, by reason:\n", len(p.Excluded))
	for _, l := range p.ReasonCounts() {
		fmt.Println(l)
	}
}

// repoRoot is the folder of Terrace's go.mod, at or above the working dir.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/terracehq/terrace\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run this inside the Terrace repository")
		}
		dir = parent
	}
}
