package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// stepRecorder is the bench server's log handler: it passes every record
// on, and sums the runner's "job step" debug records (internal/runner
// jobExec.took: how long each step of a job took) by step, so that (c)
// can say where the workers' time went. The runner is the only debug
// logger on the run path, so enabling debug costs the server nothing else.
type stepRecorder struct {
	next slog.Handler
	s    *stepSums
}

type stepSums struct {
	mu    sync.Mutex
	on    bool
	total map[string]time.Duration
	count map[string]int
}

func newStepRecorder(next slog.Handler) *stepRecorder {
	return &stepRecorder{next: next, s: &stepSums{total: map[string]time.Duration{}, count: map[string]int{}}}
}

func (h *stepRecorder) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelDebug
}

func (h *stepRecorder) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "job step" {
		var step string
		var d time.Duration
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "step":
				step = a.Value.String()
			case "duration":
				d = a.Value.Duration()
			}
			return true
		})
		h.s.mu.Lock()
		if h.s.on {
			h.s.total[step] += d
			h.s.count[step]++
		}
		h.s.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *stepRecorder) WithAttrs(as []slog.Attr) slog.Handler {
	return &stepRecorder{next: h.next.WithAttrs(as), s: h.s}
}

func (h *stepRecorder) WithGroup(name string) slog.Handler {
	return &stepRecorder{next: h.next.WithGroup(name), s: h.s}
}

// start clears the sums and starts recording.
func (s *stepSums) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on, s.total, s.count = true, map[string]time.Duration{}, map[string]int{}
}

// stop stops recording and returns the sums.
func (s *stepSums) stop() (map[string]time.Duration, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.on = false
	return s.total, s.count
}

// cpuTimes are this process's CPU seconds (user+system): its own, and
// those of its children that ended and were waited for (RUSAGE_CHILDREN:
// in (c) only the runner's terraform processes, and what they started).
type cpuTimes struct{ self, children time.Duration }

func cpuNow() cpuTimes {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return cpuTimes{self: tv(self.Utime) + tv(self.Stime), children: tv(kids.Utime) + tv(kids.Stime)}
}

func (c cpuTimes) sub(o cpuTimes) cpuTimes {
	return cpuTimes{self: c.self - o.self, children: c.children - o.children}
}

// phaseOf groups the runner's steps into the phases (c) reports.
var phaseOf = map[string]string{
	"inputs":                       "inputs (job inputs from the server)",
	"prepare":                      "prepare (scratch folder, configuration, variables)",
	"terraform init":               "terraform init",
	"terraform plan":               "terraform plan",
	"terraform apply":              "terraform apply",
	"terraform show":               "terraform show -json (plan JSON, after the apply)",
	"terraform providers":          "terraform providers schema -json",
	"report plan":                  "reporting (plan, apply, plan JSON upload, log flush)",
	"report apply":                 "reporting (plan, apply, plan JSON upload, log flush)",
	"upload plan JSON":             "reporting (plan, apply, plan JSON upload, log flush)",
	"plan JSON (beside the apply)": "plan JSON beside the apply (CLI runs)",
	"wait for plan JSON":           "plan JSON beside the apply (CLI runs)",
}

// printBreakdown prints (c)'s CPU split and wall-clock breakdown.
// wall is the measurement's wall-clock time (first POST to the last job's
// end), queueWait the sum over runs of plan_queued → planning.
func printBreakdown(n, concurrency, cpus int, cpu cpuTimes, wall time.Duration, steps map[string]time.Duration, counts map[string]int, queueWait time.Duration) {
	per := func(d time.Duration) float64 { return d.Seconds() / float64(n) }
	tf, rest := cpu.children, cpu.self
	total := tf + rest
	fmt.Printf("  CPU per run (getrusage, first POST to the last job's end, %d runs): %.3f s in all = terraform %.3f s (child processes: RUSAGE_CHILDREN) + Terrace %.3f s (this process: the server, its in-process runner, and the bench's own client creating the runs and polling the store)\n",
		n, per(total), per(tf), per(rest))
	if total > 0 {
		fmt.Printf("  not terraform: %.0f%% of the CPU time\n", 100*rest.Seconds()/total.Seconds())
	}
	if tf > 0 {
		fmt.Printf("  ceiling on this machine from terraform's own CPU alone (%d CPUs / %.3f CPU-s per run): %.0f runs per minute; with Terrace's share as measured: %.0f\n",
			cpus, per(tf), float64(cpus)*60/per(tf), float64(cpus)*60/per(total))
	}
	fmt.Printf("  CPU busy: %.0f%% of %d CPUs over %s\n", 100*total.Seconds()/(wall.Seconds()*float64(cpus)), cpus, wall.Round(100*time.Millisecond))
	jobs := steps["job"]
	if jobs == 0 {
		fmt.Println("  (no job step records: the runner's debug log did not reach the bench; no wall-clock breakdown)")
		return
	}
	fmt.Printf("  wall clock: queue wait (plan_queued → planning; all runs are created at once, so mostly the backlog) %.2f s per run on average; the runner's %d workers were busy %.0f%% of the time, %d jobs, %.3f s per run in jobs:\n",
		per(queueWait), concurrency, 100*jobs.Seconds()/(wall.Seconds()*float64(concurrency)), counts["job"], per(jobs))
	phases := map[string]time.Duration{}
	var known time.Duration
	for step, d := range steps {
		if step == "job" || step == "plan JSON (beside the apply)" {
			continue // the whole job; or a step that runs beside the apply
		}
		name, ok := phaseOf[step]
		if !ok {
			name = step
		}
		phases[name] += d
		known += d
	}
	if rest := jobs - known; rest > 0 {
		phases["other (log headers, heartbeats set-up, scratch removal, between steps)"] += rest
	}
	names := make([]string, 0, len(phases))
	for k := range phases {
		names = append(names, k)
	}
	slices.SortFunc(names, func(a, b string) int { return int(phases[b] - phases[a]) })
	for _, k := range names {
		fmt.Printf("    %-75s %6.3f s per run  %4.1f%%\n", k, per(phases[k]), 100*phases[k].Seconds()/jobs.Seconds())
	}
	var tfWall time.Duration
	for step, d := range steps {
		if len(step) > 10 && step[:10] == "terraform " {
			tfWall += d
		}
	}
	fmt.Printf("  terraform's share of the job time: %.0f%% (the rest is ours)\n", 100*tfWall.Seconds()/jobs.Seconds())
}

// startCPUProfile writes a CPU profile of this process to path until the
// returned function is first called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return sync.OnceFunc(func() { pprof.StopCPUProfile(); f.Close() }), nil
}

// localReference is (c)'s yardstick, measured in the same run: n runs of
// terraform alone (init, plan -out, apply of that plan, show -json of it,
// each in a fresh folder, the configuration of (c)), concurrency at a
// time as the runner runs them. It prints runs per minute and each step's
// CPU time (user+system of the process, from its own rusage), and returns
// the CPU seconds per run of init+plan+apply+show.
func (b *bench) localReference(ctx context.Context, n, concurrency int) (time.Duration, error) {
	steps := [][]string{
		{"init", "-input=false", "-no-color"},
		{"plan", "-input=false", "-no-color", "-out=tfplan"},
		{"apply", "-input=false", "-no-color", "tfplan"},
		{"show", "-json", "-no-color", "tfplan"},
	}
	var mu sync.Mutex
	cpu := make([]time.Duration, len(steps))
	sem := make(chan struct{}, concurrency)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			dir, err := os.MkdirTemp(b.tmp, "local-")
			if err != nil {
				errs <- err
				return
			}
			defer os.RemoveAll(dir)
			if err := os.WriteFile(filepath.Join(dir, "main.tf"), []byte(smallConfig), 0o644); err != nil {
				errs <- err
				return
			}
			for i, args := range steps {
				cmd := exec.CommandContext(ctx, b.tf, args...)
				cmd.Dir = dir
				cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1", "TF_CLI_CONFIG_FILE=" + filepath.Join(dir, "none.rc")}
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("terraform %s: %v\n%s", strings.Join(args, " "), err, out)
					return
				}
				mu.Lock()
				cpu[i] += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return 0, err
	}
	wall := time.Since(start)
	var total time.Duration
	var parts []string
	for i, d := range cpu {
		total += d
		parts = append(parts, fmt.Sprintf("%s %.3f", steps[i][0], d.Seconds()/float64(n)))
	}
	fmt.Printf("  terraform alone, same configuration, %d runs %d at a time (init, plan -out, apply, show -json; no server): %.0f runs per minute; CPU-s per run %.3f (%s), load average %s\n",
		n, concurrency, float64(n)/wall.Minutes(), total.Seconds()/float64(n), strings.Join(parts, ", "), loadavg())
	return total / time.Duration(n), nil
}
