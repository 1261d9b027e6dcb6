package moduletest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/runner"
	"github.com/terracehq/terrace/internal/slug"
	"github.com/terracehq/terrace/internal/store"
)

// ExecConfig is where and how terraform runs a test run, on the server
// or on an agent.
type ExecConfig struct {
	// Engines finds terraform: a test run uses the newest there is (a
	// module names no version).
	Engines *engine.Finder
	// ScratchDir, CLIConfig and PluginCacheDir are the run runner's.
	ScratchDir, CLIConfig, PluginCacheDir string
	// CAFile, when set, is the CA terraform trusts (the server's own, for
	// a self-signed certificate).
	CAFile string
	// CancelGrace is how long terraform gets to stop once the executor
	// stops, before it is killed.
	CancelGrace time.Duration
	// Heartbeat is how often a running test renews its lease and reads
	// its signal (default 1s).
	Heartbeat time.Duration
}

// withDefaults fills what c leaves unset.
func (c ExecConfig) withDefaults() ExecConfig {
	if c.Engines == nil {
		c.Engines = &engine.Finder{}
	}
	if c.CancelGrace <= 0 {
		c.CancelGrace = 10 * time.Second
	}
	if c.Heartbeat <= 0 {
		c.Heartbeat = time.Second
	}
	// terraform runs in the run's folder: a relative folder handed to it
	// would be looked up from there.
	for _, dir := range []*string{&c.ScratchDir, &c.PluginCacheDir} {
		if *dir != "" {
			if abs, err := filepath.Abs(*dir); err == nil {
				*dir = abs
			}
		}
	}
	return c
}

// ExecutorConfig configures the server's executor of test runs (those of
// modules whose tests run on the server; agents run the others).
type ExecutorConfig struct {
	// ID names this executor in leases; Concurrency is how many test runs
	// it runs at once (default 1).
	ID          string
	Concurrency int
	ExecConfig
	// Poll is how often an idle executor looks for queued runs and ends
	// runs whose executor died (default 15s): a safety net, since a
	// queued run wakes every replica's executor (Service.Wake).
	Poll time.Duration
}

// Start runs the executor until ctx ends; the returned function waits for
// it to stop.
func (s *Service) Start(ctx context.Context, cfg ExecutorConfig) (wait func()) {
	if cfg.ID == "" {
		cfg.ID = "tests-" + core.RandomString(10)
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 1
	}
	cfg.ExecConfig = cfg.ExecConfig.withDefaults()
	if cfg.Poll <= 0 {
		cfg.Poll = 15 * time.Second
	}
	var wg sync.WaitGroup
	for i := 0; i < cfg.Concurrency; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.work(ctx, cfg)
		}()
	}
	return wg.Wait
}

func (s *Service) work(ctx context.Context, cfg ExecutorConfig) {
	t := time.NewTicker(cfg.Poll)
	defer t.Stop()
	for ctx.Err() == nil {
		if err := s.reap(ctx); err != nil && ctx.Err() == nil {
			s.Logger.Warn("ending test runs whose executor stopped", "error", err)
		}
		tr, err := s.claim(ctx, cfg.ID, "")
		if err != nil && ctx.Err() == nil {
			s.Logger.Warn("claiming a test run", "error", err)
		}
		if tr != nil {
			s.execute(ctx, cfg, tr)
			continue // another may be queued
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-s.wake.C():
		}
	}
}

// claim takes, for runner, the oldest queued test run of agent pool pool
// ("": the server's).
func (s *Service) claim(ctx context.Context, runnerID, pool string) (*TestRun, error) {
	// Most claims find nothing (an idle agent asks at each claim it
	// makes): a read says so without taking the store's writer.
	var one int
	err := s.DB.QueryRow(ctx, `SELECT 1 FROM module_test_runs WHERE agent_pool_id = ? AND status = ? LIMIT 1`, pool, string(StatusQueued)).Scan(&one)
	if store.IsNoRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var tr *TestRun
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		q := `SELECT ` + cols + ` FROM module_test_runs WHERE agent_pool_id = ? AND status = ? ORDER BY created_at, id LIMIT 1`
		if tx.Driver().Name() == "postgres" {
			q += ` FOR UPDATE SKIP LOCKED`
		}
		t, err := s.scan(tx.QueryRow(ctx, q, pool, string(StatusQueued)))
		if store.IsNoRows(err) {
			return nil
		}
		if err != nil {
			return err
		}
		now := core.Now()
		if err := s.move(ctx, tx, t, StatusRunning, now, `runner_id = ?, lease_until = ?`, runnerID, core.Micros(now.Add(s.LeaseTTL))); err != nil {
			return err
		}
		tr = t
		return nil
	})
	return tr, err
}

// Heartbeat renews the lease of a running test run and reads its signal;
// held is false when the run is no longer this executor's (ended by a
// replica that took the lease for lost, or its module deleted).
func (s *Service) Heartbeat(ctx context.Context, id, runnerID string) (sig Signal, held bool, err error) {
	var signal string
	err = s.DB.QueryRow(ctx, `UPDATE module_test_runs SET lease_until = ? WHERE id = ? AND runner_id = ? AND status = ? RETURNING signal`,
		core.Micros(core.Now().Add(s.LeaseTTL)), id, runnerID, string(StatusRunning)).Scan(&signal)
	if store.IsNoRows(err) {
		return NoSignal, false, nil
	}
	if err != nil {
		return NoSignal, true, err
	}
	return Signal(signal), true, nil
}

// Outcome is how a test run ended (no Status: it is not its executor's
// to report, the run having been taken from it).
type Outcome struct {
	Status  Status     `json:"status"`
	Verdict TestStatus `json:"test_status"`
	Counts  Counts     `json:"counts"`
	// Tail is the end of the log: why it errored, …
	Tail string `json:"tail,omitempty"`
}

// check refuses an outcome no executor could have reached.
func (o Outcome) check() error {
	if o.Status != StatusFinished && o.Status != StatusErrored && o.Status != StatusCanceled {
		return core.Invalid("a test run ends finished, errored or canceled, not %q", o.Status)
	}
	if !validTestStatus(string(o.Verdict)) {
		return core.Invalid("test status %q is not one terraform test reports", o.Verdict)
	}
	if o.Counts.Passed < 0 || o.Counts.Failed < 0 || o.Counts.Errored < 0 || o.Counts.Skipped < 0 {
		return core.Invalid("test counts must not be negative")
	}
	if len(o.Tail) > maxTail {
		return core.Invalid("the end of a test run's log is at most %d bytes", maxTail)
	}
	return nil
}

// maxTail bounds the end of a log sent with an outcome.
const maxTail = 64 << 10

// finish records a running test run's outcome and closes its log.
func (s *Service) finish(ctx context.Context, id, runnerID string, o Outcome) error {
	var done *TestRun
	now := core.Now()
	err := s.DB.Tx(ctx, func(tx *store.Tx) error {
		tr, err := s.read(ctx, tx, id, true)
		if err != nil {
			return err
		}
		if tr.Status != StatusRunning || tr.runnerID != runnerID {
			return core.Conflict("test run %s is %s, and no longer this executor's", id, tr.Status)
		}
		tr.TestStatus, tr.Counts = o.Verdict, o.Counts
		done = tr
		if err := s.move(ctx, tx, tr, o.Status, now, `test_status = ?, tests_passed = ?, tests_failed = ?, tests_errored = ?, tests_skipped = ?, runner_id = '', signal = ''`,
			string(o.Verdict), o.Counts.Passed, o.Counts.Failed, o.Counts.Errored, o.Counts.Skipped); err != nil {
			return err
		}
		return s.endIn(ctx, tx, id, o.Tail)
	})
	if err != nil {
		return err
	}
	s.ended(done, o.Status, now)
	return s.Logs.CloseLog(ctx, id)
}

// reap ends as errored the running test runs whose lease ran out: their
// executor stopped (its replica died) before it could report.
func (s *Service) reap(ctx context.Context) error {
	ids, err := store.Strings(ctx, s.DB, `SELECT id FROM module_test_runs WHERE status = ? AND lease_until < ?`, string(StatusRunning), core.Micros(core.Now()))
	if err != nil {
		return err
	}
	for _, id := range ids {
		var ended *TestRun
		now := core.Now()
		err := s.DB.Tx(ctx, func(tx *store.Tx) error {
			tr, err := s.read(ctx, tx, id, true)
			if err != nil || tr.Status != StatusRunning || tr.leaseUntil >= core.Micros(now) {
				return err // ended or renewed meanwhile
			}
			ended = tr
			tr.TestStatus = TestError
			if err := s.move(ctx, tx, tr, StatusErrored, now, `test_status = ?, runner_id = '', signal = ''`, string(TestError)); err != nil {
				return err
			}
			return s.endIn(ctx, tx, id, reapedTail(tr))
		})
		if err == nil && ended != nil {
			s.ended(ended, StatusErrored, now)
			err = s.Logs.CloseLog(ctx, id)
		}
		if err != nil && core.KindOf(err) != core.KindNotFound {
			return err
		}
	}
	return nil
}

// reapedTail ends the log of a test run whose executor went silent.
func reapedTail(tr *TestRun) string {
	who := "The server executing this test run"
	if tr.AgentPoolID != "" {
		who = "The agent executing this test run (of agent pool " + tr.AgentPoolID + ")"
	}
	return "\n" + who + " stopped before it ended: the test run errored. Resources its tests made may be left behind.\n"
}

// logAppender ships a LogWriter's chunks to the log store.
type logAppender struct{ logs Logs }

func (a logAppender) AppendLog(ctx context.Context, _, logID string, data []byte) error {
	return a.logs.AppendLog(ctx, logID, data)
}

// execute runs one claimed test run to its end and reports it.
func (s *Service) execute(ctx context.Context, cfg ExecutorConfig, tr *TestRun) {
	log := s.Logger.With("test_run", tr.ID, "module", tr.ModuleID)
	o := s.runHere(ctx, cfg, tr, log)
	if ctx.Err() != nil || o.Status == "" {
		// The server is stopping, or the run is no longer this executor's
		// (its lease was taken for lost): the lease runs out and a
		// replica (this one, restarted) ends the run as errored.
		return
	}
	if err := s.finish(context.WithoutCancel(ctx), tr.ID, cfg.ID, o); err != nil {
		log.Warn("recording a test run's outcome", "error", err)
	}
}

// errored is the outcome of a test run that could not run.
func errored(format string, args ...any) Outcome {
	return Outcome{Status: StatusErrored, Verdict: TestError, Tail: "\nError: " + fmt.Sprintf(format, args...) + "\n"}
}

// runHere gathers what a test run on the server needs and runs it.
func (s *Service) runHere(ctx context.Context, cfg ExecutorConfig, tr *TestRun, log *slog.Logger) Outcome {
	in, err := s.Inputs(ctx, tr)
	if err != nil {
		return errored("%v", err)
	}
	w := &Work{Run: tr, Inputs: *in,
		Configuration: func(ctx context.Context) (io.ReadCloser, error) {
			return s.Configs.Open(ctx, tr.ConfigurationVersionID)
		},
		Heartbeat: func(ctx context.Context) (Signal, bool, error) { return s.Heartbeat(ctx, tr.ID, cfg.ID) },
		Log:       logAppender{s.Logs}}
	return Execute(ctx, cfg.ExecConfig, w, log)
}

// Inputs are what a test run needs beside its configuration, wherever it
// runs (the server's executor, or an agent through internal/jobapi).
type Inputs struct {
	// Env are the module's test variables (sensitive ones too: terraform
	// needs them).
	Env []EnvVar `json:"env"`
	// Token, when set, is terraform's credentials for Hostname (the
	// server): the run's own token, which reads the private registry.
	Token    string `json:"token,omitempty"`
	Hostname string `json:"hostname,omitempty"`
	// Sudo lets terraform gain privileges (the organization's setting).
	Sudo bool `json:"sudo,omitempty"`
}

// Inputs gathers tr's inputs: the module's test variables, the run's
// registry credentials (when the server has a hostname) and the
// organization's sudo setting.
func (s *Service) Inputs(ctx context.Context, tr *TestRun) (*Inputs, error) {
	env, err := s.Variables.ModuleTestVariables(ctx, tr.Organization, tr.ModuleID)
	if err != nil {
		return nil, fmt.Errorf("reading the module's test variables: %w", err)
	}
	in := &Inputs{Env: env, Hostname: s.Hostname}
	if s.Token != nil && s.Hostname != "" {
		if in.Token, err = s.Token(ctx, tr); err != nil {
			return nil, fmt.Errorf("making the test run's registry credentials: %w", err)
		}
	}
	if s.Sudo != nil {
		if in.Sudo, err = s.Sudo(ctx, tr.Organization); err != nil {
			return nil, fmt.Errorf("reading the organization's settings: %w", err)
		}
	}
	return in, nil
}

// Work is one test run as its executor runs it: the server's, or an
// agent's through the job protocol (internal/jobapi).
type Work struct {
	// Run is the test run (its ID, organization, options and -var values).
	Run *TestRun
	Inputs
	// Configuration opens the module's archive (a tar.gz).
	Configuration func(ctx context.Context) (io.ReadCloser, error)
	// Heartbeat renews the run's lease and reads its signal; held is
	// false once the run is no longer this executor's.
	Heartbeat func(ctx context.Context) (sig Signal, held bool, err error)
	// Log takes the log's chunks (masked already).
	Log runner.LogAppender
}

// Execute does the work of a test run: its folder, terraform init,
// terraform test, with heartbeats and cancels around them; it returns how
// the run ended, for its executor to report.
func Execute(ctx context.Context, cfg ExecConfig, w *Work, log *slog.Logger) Outcome {
	cfg = cfg.withDefaults()
	tr := w.Run
	var secrets []string
	for _, v := range w.Env {
		if v.Sensitive {
			secrets = append(secrets, v.Value)
		}
	}
	// The run's registry credentials: masked in its log like a sensitive
	// variable (a test can read terraform's CLI configuration).
	if w.Token != "" {
		secrets = append(secrets, w.Token)
	}
	out := runner.NewLogWriter(ctx, w.Log, tr.ID, tr.ID, secrets, func(err error) { log.Warn("a log chunk was refused", "error", err) })
	defer out.Close()
	// The lease is renewed from here on: preparing a large module takes
	// time too.
	signals, lost := make(chan Signal, 2), make(chan struct{})
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go beat(hbCtx, cfg.Heartbeat, w.Heartbeat, signals, lost, log)

	dir, err := os.MkdirTemp(cfg.ScratchDir, "terrace-test-"+tr.ID+"-")
	if err != nil {
		return errored("making the test run's folder: %v", err)
	}
	defer os.RemoveAll(dir)
	wd := filepath.Join(dir, "module")
	if err := os.Mkdir(wd, 0o700); err != nil {
		return errored("making the test run's folder: %v", err)
	}
	rc, err := w.Configuration(ctx)
	if err != nil {
		return errored("reading the module's configuration: %v", err)
	}
	err = slug.Unpack(rc, wd, slug.Limits{})
	rc.Close()
	if err != nil {
		return errored("unpacking the module's configuration: %v", err)
	}
	bin, err := cfg.Engines.Find(ctx, "")
	if err != nil {
		return errored("finding terraform: %v", err)
	}
	env, err := testEnv(dir, cfg, w.Hostname, w.Token, w.Env)
	if err != nil {
		return errored("%v", err)
	}
	args, err := testArgs(dir, tr)
	if err != nil {
		return errored("%v", err)
	}
	x := &process{bin: bin, wd: wd, env: env, grace: cfg.CancelGrace, signals: signals, noNewPrivs: !w.Sudo}

	// init's output only matters when it fails: a test log is terraform
	// test's JSON lines, which the CLI renders.
	var initOut bytes.Buffer
	initArgs := []string{"init", "-input=false", "-no-color"}
	if tr.Options.TestDirectory != "" {
		initArgs = append(initArgs, "-test-directory="+tr.Options.TestDirectory)
	}
	code, err := x.run(ctx, lost, &initOut, &initOut, initArgs...)
	switch {
	case x.lost:
		return Outcome{}
	case err != nil:
		return errored("running terraform init: %v", err)
	case x.canceled != NoSignal:
		return Outcome{Status: StatusCanceled, Verdict: TestPending, Tail: "\nThe test run was canceled.\n"}
	case code != 0:
		_, _ = out.Write(initOut.Bytes())
		return errored("terraform init failed (exit code %d)", code)
	case ctx.Err() != nil:
		return Outcome{} // the executor is stopping: the lease ends the run
	}

	sum := &summary{}
	code, err = x.run(ctx, lost, io.MultiWriter(out, sum), out, args...)
	if err != nil {
		return errored("running terraform test: %v", err)
	}
	switch {
	case x.lost:
		return Outcome{}
	case x.canceled != NoSignal:
		return Outcome{Status: StatusCanceled, Verdict: TestPending, Counts: sum.counts, Tail: "\nThe test run was canceled.\n"}
	case !sum.found:
		return errored("terraform test ended (exit code %d) without a summary", code)
	}
	return Outcome{Status: StatusFinished, Verdict: sum.verdict, Counts: sum.counts}
}

// beat renews the lease every interval, passing on signals; lost closes
// when the run is no longer this executor's.
func beat(ctx context.Context, every time.Duration, heartbeat func(context.Context) (Signal, bool, error), signals chan<- Signal, lost chan<- struct{}, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	sent := NoSignal
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sig, held, err := heartbeat(ctx)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("renewing a test run's lease", "error", err)
			}
			continue
		}
		if !held {
			close(lost)
			return
		}
		if sig != NoSignal && sig != sent {
			sent = sig
			signals <- sig
		}
	}
}

// testEnv is terraform's environment: nothing of the server's but PATH,
// a home and CLI configuration of the run's own (with the run's token as
// the credentials for the server, so that private registry modules and
// providers install), the server's CA, and the module's test variables.
func testEnv(dir string, cfg ExecConfig, hostname, token string, vars []EnvVar) ([]string, error) {
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	rc := filepath.Join(dir, "terraform.rc")
	cli := cfg.CLIConfig
	if token != "" && hostname != "" {
		cli = fmt.Sprintf("credentials %q {\n  token = %q\n}\n", hostname, token) + cli
	}
	if err := os.WriteFile(rc, []byte(cli), 0o600); err != nil {
		return nil, err
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TF_CLI_CONFIG_FILE=" + rc,
		"TF_IN_AUTOMATION=1", "TF_INPUT=0", "CHECKPOINT_DISABLE=1"}
	if cfg.CAFile != "" {
		ca, err := filepath.Abs(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("finding the CA file %s: %w", cfg.CAFile, err)
		}
		env = append(env, "SSL_CERT_FILE="+ca)
	}
	if cfg.PluginCacheDir != "" {
		env = append(env, "TF_PLUGIN_CACHE_DIR="+cfg.PluginCacheDir)
	}
	for _, v := range vars {
		env = append(env, v.Key+"="+v.Value)
	}
	return env, nil
}

// testArgs is terraform test's command line; the run variables go in a
// variables file (their values are HCL expressions, as the CLI sent them).
func testArgs(dir string, tr *TestRun) ([]string, error) {
	args := []string{"test", "-json", "-no-color"}
	if tr.Options.TestDirectory != "" {
		args = append(args, "-test-directory="+tr.Options.TestDirectory)
	}
	for _, f := range tr.Options.Filters {
		args = append(args, "-filter="+f)
	}
	if tr.Options.Verbose {
		args = append(args, "-verbose")
	}
	if len(tr.Variables) > 0 {
		vars := append([]Variable(nil), tr.Variables...)
		sort.Slice(vars, func(a, b int) bool { return vars[a].Key < vars[b].Key })
		var b strings.Builder
		for _, v := range vars {
			fmt.Fprintf(&b, "%s = %s\n", v.Key, v.Value)
		}
		f := filepath.Join(dir, "run.tfvars")
		if err := os.WriteFile(f, []byte(b.String()), 0o600); err != nil {
			return nil, err
		}
		args = append(args, "-var-file="+f)
	}
	return args, nil
}

// summary reads terraform test's JSON lines for its test_summary.
type summary struct {
	partial []byte
	found   bool
	verdict TestStatus
	counts  Counts
}

func (s *summary) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		s.line(s.partial[:i])
		s.partial = s.partial[i+1:]
	}
	return len(p), nil
}

func (s *summary) line(l []byte) {
	if !bytes.Contains(l, []byte(`"test_summary"`)) {
		return
	}
	var m struct {
		Type    string `json:"type"`
		Summary *struct {
			Status string `json:"status"`
			Counts
		} `json:"test_summary"`
	}
	if json.Unmarshal(l, &m) != nil || m.Type != "test_summary" || m.Summary == nil || !validTestStatus(m.Summary.Status) {
		return
	}
	s.found, s.verdict, s.counts = true, TestStatus(m.Summary.Status), m.Summary.Counts
}

// process runs terraform commands of one test run, passing signals on.
type process struct {
	bin, wd    string
	env        []string
	noNewPrivs bool
	grace      time.Duration
	signals    chan Signal
	canceled   Signal // the strongest signal received
	lost       bool   // the lease was lost: terraform was killed
}

// run runs terraform with args until it ends: a cancel interrupts it (it
// tears down what the tests made), a force cancel or a lost lease kills
// its process group, and so does the server's stop after the grace.
func (x *process) run(ctx context.Context, lost <-chan struct{}, stdout, stderr io.Writer, args ...string) (int, error) {
	if x.canceled != NoSignal {
		return 0, nil // canceled before this step: it is not started
	}
	select {
	case <-lost:
		x.lost = true
		return 0, nil
	default:
	}
	cmd := exec.Command(x.bin, args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = x.wd, x.env, stdout, stderr
	cmd.SysProcAttr = runner.ProcAttr()
	wait, err := runner.StartCommand(cmd, x.noNewPrivs)
	if err != nil {
		return -1, err
	}
	done := make(chan error, 1)
	go func() { done <- wait() }()
	kill := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stopping <-chan time.Time
	for {
		select {
		case err := <-done:
			return runner.ExitCode(err)
		case sig := <-x.signals:
			if sig == SignalForce {
				x.canceled = SignalForce
				kill()
			} else if x.canceled == NoSignal {
				x.canceled = SignalCancel
				_ = cmd.Process.Signal(os.Interrupt)
			}
		case <-lost:
			lost = nil
			x.lost, x.canceled = true, SignalForce
			kill()
		case <-ctx.Done():
			ctx = context.Background() // once
			_ = cmd.Process.Signal(os.Interrupt)
			stopping = time.After(x.grace)
		case <-stopping:
			kill()
		}
	}
}
