package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/terracehq/terrace/internal/engine"
	"github.com/terracehq/terrace/internal/run"
	"github.com/terracehq/terrace/internal/slug"
)

// jobExec is one job's execution.
type jobExec struct {
	r   *Runner
	job *run.Job
	log *slog.Logger

	bin string
	dir string // scratch root
	wd  string // terraform working directory
	env []string
	// varFiles are the -var-file flags of the run's variables (see
	// writeVarFiles), for every command that evaluates them.
	varFiles []string
	// statePath is the state file of the terraform workspace the run
	// selects (see workspace.go).
	statePath string
	// saved is the working directory's saved plan once read (savedPlan).
	saved *savedPlan
	out   *logWriter
	// secrets are the values masked in the logs and the redacted plan
	// JSON (maskList): held in memory only.
	secrets []string
	// structured: the workspace has structured run output on, so plan
	// and apply write terraform's JSON log lines (-json), as HCP
	// Terraform's runs do: terraform's cloud backend then renders the
	// plan once, from its redacted JSON, and skips the plan's own
	// change lines; with text logs it prints both. Not for a client that
	// cannot render them (run.Run.TextLog).
	structured bool
	cancel     run.Signal // the strongest signal seen
	sig        chan run.Signal
	// installed says the engine was downloaded for this job, or chosen
	// for a version constraint (shown after the log's header), "" when
	// it was there already as named.
	installed string
	// limit is the phase running's time limit (see limitPhase): expired
	// fires when it has passed, and timedOut says it did.
	limit    phaseLimit
	expired  <-chan time.Time
	timedOut bool
	// noNewPrivs: terraform starts with no_new_privs (Inputs.NoNewPrivs).
	noNewPrivs bool
	// vault are the Vault tokens the phase logged in for (vaultLogin),
	// revoked when it ends.
	vault []vaultSession
}

// phaseLimit is a phase's time limit: the site's plan-timeout or
// apply-timeout, or the organization's own.
type phaseLimit struct {
	phase string // "plan" or "apply"
	d     time.Duration
	own   bool // the organization's
}

// whose says whose limit it is, for the log.
func (l phaseLimit) whose() string {
	if l.own {
		return "organization's"
	}
	return "site's"
}

// limitPhase starts phase's time limit d (none when 0; own: the
// organization's); stop ends it. A terraform command running when it
// passes is interrupted as a cancel would (SIGINT, then SIGKILL after the
// grace period), and the phase errors with timeoutError.
func (j *jobExec) limitPhase(phase string, d time.Duration, own bool) (stop func()) {
	j.limit, j.expired, j.timedOut = phaseLimit{phase, d, own}, nil, false
	if d <= 0 {
		return func() {}
	}
	t := time.NewTimer(d)
	j.expired = t.C
	return func() {
		t.Stop()
		j.expired = nil
	}
}

// timeoutError is what a phase that ran out of time reports.
func (j *jobExec) timeoutError() string {
	return fmt.Sprintf("Error: the %s was stopped: it reached the %s %s timeout of %s", j.limit.phase, j.limit.whose(), j.limit.phase, shortDuration(j.limit.d))
}

// shortDuration writes d as it would be set: "2h", "1h30m", "90s".
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func (j *jobExec) run(ctx context.Context) error {
	// Heartbeats and cancel signals.
	j.sig = make(chan run.Signal, 4)
	hbCtx, stopHB := context.WithCancel(ctx)
	defer stopHB()
	go j.heartbeat(hbCtx)

	r := j.job.Run
	logID := r.Plan.ID
	if j.job.Phase == run.PhaseApply {
		logID = r.Apply.ID
	}
	t0 := time.Now()
	in, err := j.r.api.Inputs(ctx, j.job)
	j.took("inputs", t0)
	if err != nil {
		return j.finish(ctx, j.r.fault(j.job, Fault{Err: fmt.Errorf("preparing the run: %w", err)}), nil)
	}
	j.secrets = maskList(in, withRunSecrets(slices.Concat(in.Variables, in.ApplyEnv), r.Variables))
	j.structured = in.Workspace != nil && in.Workspace.StructuredRunOutput && !r.TextLog
	j.noNewPrivs = in.NoNewPrivs
	j.out = newLogWriter(ctx, j.r.api, j.job.ID, logID, j.secrets)
	j.out.onError = func(err error) { j.log.Warn("a log chunk was refused", "error", err) }
	defer j.out.Close()

	t0 = time.Now()
	defer j.revokeVault(ctx) // a job that ends early: each phase revokes its own
	if err := j.prepare(ctx, in); err != nil {
		return j.finish(ctx, j.r.fault(j.job, err), nil)
	}
	j.took("prepare", t0)
	defer os.RemoveAll(j.dir)

	j.header(ctx)
	if j.job.Phase == run.PhasePlan {
		stop := j.limitPhase("plan", in.PlanTimeout, in.OwnPlanTimeout)
		res := j.plan(ctx, in)
		stop()
		// The phase's Vault tokens go with it, before the run moves on
		// (an auto-apply's apply logs in with its own role).
		j.revokeVault(ctx)
		t0 = time.Now()
		res.Log = j.out.Rest()
		res.EngineVersion = j.r.cfg.Engines.Chosen(ctx, j.job.Run.TerraformVersion, j.bin)
		cont, err := j.r.api.FinishPlan(ctx, j.job.ID, j.r.cfg.ID, res)
		j.took("report plan", t0)
		if err != nil || !cont {
			return err
		}
		cliSees := time.Now().Add(cliReadsAfterPlan) // see holdFailure
		// Auto-apply: same folder, same plan, no second init. A plan
		// reported without its JSON gets it made after the apply was
		// reported (so that show -json does not compete with the apply
		// for the machine), or beside the apply for a run of terraform's
		// cloud backend, which shows the plan before the apply's log.
		if err := j.useVars(ctx, in.ApplyEnv); err != nil {
			return j.finishApply(ctx, run.ApplyResult{Error: err.Error()})
		}
		var described func() planDescription
		after := res.JSONLater && !r.FromCLI
		if res.JSONLater && !after {
			described = j.describeBeside(ctx, in)
		}
		j.out.Close()
		j.out = newLogWriter(ctx, j.r.api, j.job.ID, r.Apply.ID, j.secrets)
		j.out.onError = func(err error) { j.log.Warn("a log chunk was refused", "error", err) }
		defer j.out.Close()
		j.header(ctx)
		stop = j.limitPhase("apply", in.ApplyTimeout, in.OwnApplyTimeout)
		applied := j.apply(ctx, in, res)
		stop()
		j.revokeVault(ctx)
		if described != nil {
			t0 := time.Now()
			if d := described(); d.planJSON != nil {
				applied.Additions, applied.Changes, applied.Destructions, applied.Imports = d.add, d.change, d.destroy, d.imports
			}
			j.took("wait for plan JSON", t0)
			cliSees = later(cliSees, time.Now().Add(cliReadsAfterJSON))
		}
		if r.FromCLI && applied.Error != "" && !applied.Canceled {
			j.holdFailure(ctx, cliSees)
		}
		if err := j.finishApply(ctx, applied); err != nil || !after || j.cancel == run.SignalForce {
			return err // force-canceled: the job is gone, nothing waits for the JSON
		}
		// The run has its outcome and the workspace is free; the job
		// ends with the plan's JSON (or the reason it could not be made).
		j.uploadDescription(ctx, j.describe(ctx, in))
		return nil
	}
	defer j.limitPhase("apply", in.ApplyTimeout, in.OwnApplyTimeout)()
	if err := j.init(ctx); err != nil {
		return j.finishApply(ctx, run.ApplyResult{Error: err.Error()})
	}
	// The plan's counts were recorded when it finished: no show -json here.
	p := r.Plan
	applied := j.apply(ctx, in, run.PlanResult{Additions: p.Additions, Changes: p.Changes, Destructions: p.Destructions, Imports: p.Imports})
	j.revokeVault(ctx)
	return j.finishApply(ctx, applied)
}

// header starts a phase's log as HCP Terraform's do: three lines naming
// the engine's version and platform. Terraform's cloud backend skips the
// first three lines of an apply log as these (it has shown them with the
// plan), so an apply log without them would lose real output.
//
// The version comes from the engine finder, which asks each binary once
// (with no CLI configuration, so that a warning cannot spoil the JSON:
// OpenTofu prints its warnings on stdout) and remembers the answer.
func (j *jobExec) header(ctx context.Context) {
	v, err := j.r.cfg.Engines.Version(ctx, j.bin)
	if err != nil || v == "" {
		v = "(unknown version)"
	}
	name := "Terraform"
	if j.opentofu() {
		name = "OpenTofu"
	}
	fmt.Fprintf(j.out, "%s v%s\non %s_%s\nInitializing plugins and modules...\n", name, strings.TrimPrefix(v, "v"), runtime.GOOS, runtime.GOARCH)
	if j.r.cfg.Describe != "" {
		fmt.Fprintln(j.out, j.r.cfg.Describe)
	}
	if j.installed != "" {
		fmt.Fprintln(j.out, j.installed)
		j.installed = "" // once: not in the apply's header of the same job
	}
}

// finish reports a job that failed before terraform ran.
func (j *jobExec) finish(ctx context.Context, err error, _ []byte) error {
	if j.out != nil {
		fmt.Fprintf(j.out, "\nError: %v\n", err)
	}
	if j.job.Phase == run.PhasePlan {
		res := run.PlanResult{Error: err.Error()}
		if j.out != nil {
			res.Log = j.out.Rest()
		}
		_, ferr := j.r.api.FinishPlan(ctx, j.job.ID, j.r.cfg.ID, res)
		return ferr
	}
	return j.finishApply(ctx, run.ApplyResult{Error: err.Error()})
}

// A run of terraform's cloud backend that goes from plan to apply in one
// job: the CLI reads the run once it has read the plan's log (go-tfe's log
// reader polls with a backoff of up to two seconds, so it may notice the
// plan's end that late) and, with structured run output, the plan's JSON.
// A run it finds errored then ends the command with no word of why: it
// shows the apply's log only for a run it sees applying or applied. HCP
// Terraform queues the apply on another worker, so its failures come too
// late for this; here an apply that fails at once would beat the CLI.
const (
	cliReadsAfterPlan = 3 * time.Second
	cliReadsAfterJSON = time.Second
)

// holdFailure waits until the CLI has seen the run applying (until) before
// a failed apply is reported: the run stays applying, with its log
// complete, a moment longer. Successful applies and runs from anywhere
// else are reported at once.
func (j *jobExec) holdFailure(ctx context.Context, until time.Time) {
	wait := time.Until(until)
	if wait <= 0 {
		return
	}
	defer j.took("hold the failure for the CLI", time.Now())
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// finishApply reports an apply with the end of its log.
func (j *jobExec) finishApply(ctx context.Context, res run.ApplyResult) error {
	defer j.took("report apply", time.Now())
	if j.out != nil {
		res.Log = j.out.Rest()
	}
	return j.r.api.FinishApply(ctx, j.job.ID, j.r.cfg.ID, res)
}

// took logs how long a step of the job took (debug level: for profiling;
// tools/bench sums these records into (c)'s wall-clock breakdown).
func (j *jobExec) took(step string, start time.Time) {
	j.log.Debug("job step", "step", step, "duration", time.Since(start))
}

// heartbeat keeps the job's lease: each heartbeat waits on the server for
// a signal, so a cancel arrives at once; after a signal or an error the
// next one waits for the heartbeat interval.
func (j *jobExec) heartbeat(ctx context.Context) {
	for ctx.Err() == nil {
		s, err := j.r.api.Heartbeat(ctx, j.job.ID, j.r.cfg.ID)
		if err != nil && ctx.Err() == nil {
			j.log.Warn("heartbeat failed", "error", err)
		}
		if s != "" {
			select {
			case j.sig <- s:
			default: // a signal is already waiting
			}
		}
		if err != nil || s != "" {
			select {
			case <-ctx.Done():
			case <-time.After(j.pause()):
			}
		}
	}
}

// pause is the longest wait between heartbeats: the runner's setting,
// but never more than a third of the lease the server gave the job.
func (j *jobExec) pause() time.Duration {
	d := j.r.cfg.Heartbeat
	if j.job.Lease > 0 {
		d = min(d, j.job.Lease/3)
	}
	return d
}

// prepare makes the scratch folder: configuration, backend override, state,
// variable files, CLI config and environment.
func (j *jobExec) prepare(ctx context.Context, in *Inputs) error {
	var err error
	var installed *engine.Build
	if j.bin, installed, err = j.r.cfg.Engines.FindOrInstall(ctx, j.job.Run.TerraformVersion, in.Engine); err != nil {
		// A registered release that cannot be installed as registered
		// (its checksum, its zip) fails the run, not the runner.
		var re *engine.ReleaseError
		if errors.As(err, &re) {
			return err
		}
		return Fault{Err: err}
	}
	if installed != nil {
		j.installed = fmt.Sprintf("Installed %s %s for %s from %s (SHA-256 %s checked) for this run.", in.Engine.Name, in.Engine.Version, installed.Platform(), installed.URL, installed.SHA256)
	}
	switch want := j.job.Run.TerraformVersion; {
	case engine.Constraint(want) != nil:
		chosen := fmt.Sprintf("The workspace's version constraint %q: the newest version it allows that is registered or installed here.", strings.TrimSpace(want))
		j.installed = strings.TrimSpace(chosen + "\n" + j.installed)
	case !engine.Exact(want) && in.Engine != nil && engine.Registered(j.bin):
		chosen := fmt.Sprintf("The workspace's version is latest: %s %s, the newest version registered on this site (newer than any %s on this runner's PATH).", in.Engine.Name, in.Engine.Version, in.Engine.Name)
		j.installed = strings.TrimSpace(chosen + "\n" + j.installed)
	}
	if j.dir, err = os.MkdirTemp(j.r.cfg.ScratchDir, scratchPrefix+j.r.cfg.ID+"-"+j.job.RunID+"-"); err != nil {
		return Fault{Err: fmt.Errorf("making the job's working folder: %w", err)}
	}
	cfgDir := filepath.Join(j.dir, "config")
	if err := os.Mkdir(cfgDir, 0o700); err != nil {
		return Fault{Err: fmt.Errorf("making the job's working folder: %w", err)}
	}
	if err := slug.Unpack(bytes.NewReader(in.Archive), cfgDir, slug.Limits{}); err != nil {
		return fmt.Errorf("unpacking the configuration: %w", err)
	}
	j.wd = filepath.Join(cfgDir, filepath.FromSlash(in.Workspace.WorkingDirectory))
	if rel, err := filepath.Rel(cfgDir, j.wd); err != nil || strings.HasPrefix(rel, "..") {
		return fmt.Errorf("working directory %q leaves the configuration", in.Workspace.WorkingDirectory)
	}
	if err := os.MkdirAll(j.wd, 0o700); err != nil {
		return err
	}
	// Whatever backend or cloud block the configuration has, the run uses
	// a local state file that Terrace fills and collects.
	override, err := needsBackendOverride(j.wd)
	if err != nil {
		return fmt.Errorf("reading the configuration: %w", err)
	}
	if override {
		if err := os.WriteFile(filepath.Join(j.wd, "zz_terrace_override.tf"), []byte("terraform {\n  backend \"local\" {}\n}\n"), 0o600); err != nil {
			return err
		}
	}
	// The run's terraform workspace is the Terrace workspace's name; an
	// apply job's is the one its saved plan was made in (made before the
	// runner named workspaces, or before the workspace was renamed).
	ws := terraformWorkspace(in.Workspace.Name)
	if in.PlanFile != nil {
		if err := os.WriteFile(filepath.Join(j.wd, "tfplan"), in.PlanFile, 0o600); err != nil {
			return err
		}
		if p, err := j.savedPlan(); err == nil && p.workspace != "" {
			ws = terraformWorkspace(p.workspace)
		}
	}
	if err := selectWorkspace(j.wd, dataDir(j.wd, in.Variables), ws); err != nil {
		return err
	}
	j.statePath = stateFile(j.wd, ws)
	if in.State != nil {
		if err := os.WriteFile(j.statePath, in.State, 0o600); err != nil {
			return err
		}
	} else if err := os.Remove(j.statePath); err != nil && !os.IsNotExist(err) {
		// A state file uploaded with the configuration is not the
		// workspace's: a workspace without state plans from none.
		return err
	}
	if in.LockFile != nil {
		if err := os.WriteFile(filepath.Join(j.wd, ".terraform.lock.hcl"), in.LockFile, 0o600); err != nil {
			return err
		}
	}
	if j.varFiles, err = writeVarFiles(filepath.Join(j.dir, "vars"), in.Variables, j.job.Run.Variables, nil); err != nil {
		return err
	}
	home := filepath.Join(j.dir, "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		return err
	}
	rc := filepath.Join(j.dir, "terraform.rc")
	cli := j.r.cfg.CLIConfig
	if in.Token != "" && in.Hostname != "" {
		cli = fmt.Sprintf("credentials %q {\n  token = %q\n}\n", in.Hostname, in.Token) + cli
	}
	if err := os.WriteFile(rc, []byte(cli), 0o600); err != nil {
		return err
	}
	// A clean environment: nothing of the server's (its cloud credentials
	// least of all) leaks into the user's configuration.
	j.env = []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"TF_CLI_CONFIG_FILE=" + rc,
		"TF_IN_AUTOMATION=1",
		"TF_INPUT=0",
		"CHECKPOINT_DISABLE=1",
	}
	// What HCP Terraform tells a run about itself, also as the input
	// variables of those names (which a configuration may declare); no
	// TFC_CONFIGURATION_VERSION_GIT_*, as Terrace ingresses no VCS.
	about := []string{
		"TFC_RUN_ID=" + j.job.RunID,
		"TFC_WORKSPACE_NAME=" + in.Workspace.Name,
		"TFC_WORKSPACE_SLUG=" + in.Workspace.Organization + "/" + in.Workspace.Name,
	}
	if in.ProjectName != "" {
		about = append(about, "TFC_PROJECT_NAME="+in.ProjectName)
	}
	for _, kv := range about {
		j.env = append(j.env, kv, "TF_VAR_"+kv)
	}
	if in.CAFile != "" {
		// Relative to where the server or agent started, not to the job's
		// folder terraform runs in.
		ca, err := filepath.Abs(in.CAFile)
		if err != nil {
			return Fault{Err: fmt.Errorf("finding the CA file %s: %w", in.CAFile, err)}
		}
		j.env = append(j.env, "SSL_CERT_FILE="+ca)
	}
	if j.r.cfg.PluginCacheDir != "" {
		j.env = append(j.env, "TF_PLUGIN_CACHE_DIR="+j.r.cfg.PluginCacheDir)
	}
	if err := j.useVars(ctx, in.Variables); err != nil {
		return err
	}
	if j.job.Run.DebuggingMode {
		// debugging-mode: terraform's TRACE log goes to stderr, so into the
		// run's log, masked like the rest of it. Last, so that it wins over
		// a TF_LOG environment variable of the workspace.
		j.env = append(j.env, "TF_LOG=TRACE")
	}
	return nil
}

// needsBackendOverride reports whether the root module in dir may have
// a backend or cloud block, or was initialised with one (a saved
// .terraform/terraform.tfstate): then the run needs zz_terrace_override.tf
// to keep its state in the local file. A module none of whose
// configuration files holds the word "backend" or "cloud" (nor, in a
// JSON file, an escape that could spell it) has neither block, and terraform already keeps its state in terraform.tfstate; an
// override there only makes it do more (a backend to configure at init and
// load at plan and apply: about 4% more of terraform's CPU time per run).
// A false alarm (the words in a string or a name) costs just that.
func needsBackendOverride(dir string) (bool, error) {
	if _, err := os.Lstat(filepath.Join(dir, ".terraform", "terraform.tfstate")); err == nil {
		return true, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !configFile(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return true, nil // terraform will say what is wrong with it
		}
		if bytes.Contains(b, []byte("backend")) || bytes.Contains(b, []byte("cloud")) {
			return true, nil
		}
		// A JSON file can spell a key with escapes ("\u0062ackend"), which
		// the word search would miss.
		if strings.HasSuffix(name, ".json") && bytes.Contains(b, []byte(`\u`)) {
			return true, nil
		}
	}
	return false, nil
}

// configFile says whether terraform or OpenTofu reads a file of this name
// as part of a module's configuration.
func configFile(name string) bool {
	for _, ext := range []string{".tf", ".tf.json", ".tofu", ".tofu.json"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return false
}

// terraform runs the engine with args, streaming its output to the log.
// It returns the exit code; a cancel signal interrupts it (SIGINT, then
// SIGKILL after the grace period; "force" kills at once).
func (j *jobExec) terraform(ctx context.Context, stdout io.Writer, args ...string) (int, error) {
	cmd := exec.Command(j.bin, args...)
	cmd.Dir = j.wd
	cmd.Env = j.env
	cmd.SysProcAttr = procAttr()
	if stdout != nil {
		cmd.Stdout = stdout
	} else {
		cmd.Stdout = j.out
	}
	cmd.Stderr = j.out
	wait, err := j.start(cmd)
	if err != nil {
		return -1, err
	}
	defer j.took("terraform "+args[0], time.Now())
	done := make(chan error, 1)
	go func() { done <- wait() }()
	var kill <-chan time.Time
	for {
		select {
		case err := <-done:
			return ExitCode(err)
		case s := <-j.sig:
			if s == run.SignalForce {
				j.cancel = run.SignalForce
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				continue
			}
			if j.cancel == run.NoSignal {
				j.cancel = run.SignalCancel
				fmt.Fprintf(j.out, "\nInterrupt received: asking terraform to stop (it is killed after %s).\n", j.r.cfg.CancelGrace)
				_ = cmd.Process.Signal(os.Interrupt)
				kill = time.After(j.r.cfg.CancelGrace)
			}
		case <-j.expired:
			j.expired = nil
			if j.cancel == run.NoSignal && !j.timedOut {
				j.timedOut = true
				fmt.Fprintf(j.out, "\nThe %s has run for the %s %s timeout of %s: asking terraform to stop (it is killed after %s).\n",
					j.limit.phase, j.limit.whose(), j.limit.phase, shortDuration(j.limit.d), j.r.cfg.CancelGrace)
				_ = cmd.Process.Signal(os.Interrupt)
				kill = time.After(j.r.cfg.CancelGrace)
			}
		case <-kill:
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		case <-ctx.Done():
			// The server is stopping: interrupt terraform so that it saves
			// state, then give up on it.
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-done:
			case <-time.After(j.r.cfg.CancelGrace):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				<-done
			}
			return -1, ctx.Err()
		}
	}
}

func (j *jobExec) init(ctx context.Context) error {
	// -force-copy: with the backend override, init moves the states of
	// the implicit local backend to the configured one, which keeps them
	// in the same files; for a named workspace with state it asks first
	// (terraform 1.11: "Do you want to migrate all workspaces to local?"),
	// and without input fails. The only other source it could copy from,
	// a backend recorded in an uploaded data folder, is forgotten by
	// selectWorkspace.
	//
	// init takes the variables too: OpenTofu 1.8 and later (and
	// terraform's const variables) evaluate them for module sources and
	// the backend; other engines read and ignore them.
	code, err := j.terraform(ctx, nil, append([]string{"init", "-input=false", "-no-color", "-force-copy"}, j.varFiles...)...)
	if err != nil {
		return err
	}
	if j.cancel != run.NoSignal {
		return errCanceled
	}
	if j.timedOut {
		return errors.New(j.timeoutError())
	}
	if code != 0 {
		return fmt.Errorf("terraform init failed (exit code %d)", code)
	}
	return nil
}

var errCanceled = errors.New("canceled")

// outputFlag is how plan and apply write their log: terraform's JSON log
// lines with structured run output, plain text without. init writes text
// either way (terraform before 1.9 has no init -json): the cloud backend
// prints a line that is not JSON as it is, so init's output and the
// runner's own lines (header, errors) show as they do without it.
func (j *jobExec) outputFlag() string {
	if j.structured {
		return "-json"
	}
	return "-no-color"
}

func (j *jobExec) plan(ctx context.Context, in *Inputs) run.PlanResult {
	if err := j.init(ctx); err != nil {
		return run.PlanResult{Error: err.Error(), Canceled: j.cancel != run.NoSignal}
	}
	r := j.job.Run
	args := []string{"plan", "-input=false", j.outputFlag(), "-lock=false", "-detailed-exitcode", "-out=tfplan"}
	if r.IsDestroy {
		args = append(args, "-destroy")
	}
	if r.RefreshOnly {
		args = append(args, "-refresh-only")
	}
	if !r.Refresh {
		args = append(args, "-refresh=false")
	}
	for _, a := range r.TargetAddrs {
		args = append(args, "-target="+a)
	}
	for _, a := range r.ReplaceAddrs {
		args = append(args, "-replace="+a)
	}
	for _, a := range r.InvokeActionAddrs {
		args = append(args, "-invoke="+a) // terraform 1.14+; older versions reject the flag and the plan errors
	}
	// Configuration for import blocks without it goes to a file outside
	// the configuration (terraform refuses a file that exists); the plan's
	// JSON carries it to the CLI, which writes its own file from it.
	generated := ""
	if r.AllowConfigGeneration {
		generated = filepath.Join(j.dir, "generated.tf")
		args = append(args, "-generate-config-out="+generated)
	}
	// Every plan (destroy, refresh-only, an assessment's) evaluates the
	// variables; apply of the saved plan takes them from the plan.
	args = append(args, j.varFiles...)
	summary := &planSummary{structured: j.structured}
	code, err := j.terraform(ctx, io.MultiWriter(j.out, summary), args...)
	switch {
	case j.cancel != run.NoSignal:
		return run.PlanResult{Canceled: true, Error: "canceled"}
	case j.timedOut:
		return run.PlanResult{Error: j.timeoutError()}
	case err != nil:
		return run.PlanResult{Error: err.Error()}
	case code == 1 && wroteConfig(generated):
		// terraform saves a plan that errored (a partial one) and the
		// configuration it generated before the error: as in HCP
		// Terraform, the errored plan says generated-configuration and
		// its JSON carries the configuration, which the CLI writes, as
		// terraform does locally, for the user to fix.
		res := run.PlanResult{Error: "terraform plan failed", GeneratedConfig: true}
		if _, err := os.Stat(filepath.Join(j.wd, "tfplan")); err == nil {
			d := j.describe(ctx, in)
			res.PlanJSON, res.RedactedJSON = d.planJSON, d.redactedJSON
		}
		return res
	case code == 1 || code < 0:
		return run.PlanResult{Error: "terraform plan failed"}
	}
	res := run.PlanResult{HasChanges: code == 2, GeneratedConfig: wroteConfig(generated)}
	if r.AutoApply && !r.SavePlan && !r.PlanOnly && !in.KeepPlan && (res.HasChanges || r.AllowEmptyApply) {
		// The run goes straight on to apply in this job, and nothing
		// reads the plan's JSON before the apply starts (no run task or
		// policy stage waits on it): the plan is reported with the counts
		// of terraform's summary line, and show -json runs beside the
		// apply. The API holds a read of the JSON until it is uploaded.
		res.JSONLater = true
		res.Additions, res.Changes, res.Destructions, res.Imports = summary.counts()
		return res
	}
	// What the API serves about the plan (json-output, the redacted JSON
	// terraform's cloud backend reads as soon as the plan ends, the counts)
	// is reported with the plan.
	d := j.describe(ctx, in)
	res.PlanJSON, res.RedactedJSON = d.planJSON, d.redactedJSON
	res.Additions, res.Changes, res.Destructions, res.Imports = d.add, d.change, d.destroy, d.imports
	if !r.AutoApply || r.SavePlan || r.PlanOnly || in.KeepPlan {
		// The run may wait for confirmation: keep what the apply needs.
		if b, err := os.ReadFile(filepath.Join(j.wd, "tfplan")); err == nil {
			res.PlanFile = b
		}
		if b, err := os.ReadFile(filepath.Join(j.wd, ".terraform.lock.hcl")); err == nil {
			res.LockFile = b
		}
	}
	return res
}

// wroteConfig reports whether terraform wrote configuration to the
// -generate-config-out file path ("" when the plan had none).
func wroteConfig(path string) bool {
	if path == "" {
		return false
	}
	fi, err := os.Stat(path)
	return err == nil && fi.Size() > 0
}

// apply applies the saved plan in the working directory; planned carries
// the plan's counts.
func (j *jobExec) apply(ctx context.Context, in *Inputs, planned run.PlanResult) run.ApplyResult {
	res := run.ApplyResult{Additions: planned.Additions, Changes: planned.Changes, Destructions: planned.Destructions, Imports: planned.Imports}
	varFiles, err := j.applyVarFiles(ctx, in)
	if err != nil {
		res.Error = fmt.Sprintf("writing the variables: %v", err)
		return res
	}
	before, _ := os.ReadFile(j.statePath)
	stopSnapshots := j.snapshots(ctx, before)
	args := append([]string{"apply", "-input=false", j.outputFlag(), "-lock=false", "-auto-approve"}, varFiles...)
	code, err := j.terraform(ctx, nil, append(args, "tfplan")...)
	stopSnapshots()
	// The state terraform left counts even when the apply failed.
	if after, err := os.ReadFile(j.statePath); err == nil && !bytes.Equal(before, after) {
		res.State = after
	}
	switch {
	case j.cancel != run.NoSignal:
		res.Canceled, res.Error = true, "canceled"
	case j.timedOut:
		res.Error = j.timeoutError()
	case err != nil:
		res.Error = err.Error()
	case code != 0:
		res.Error = "terraform apply failed"
	}
	return res
}

// snapshots uploads the state terraform saves while it applies: its local
// state manager rewrites the workspace's state file after every resource it
// changes, and each new complete version goes to the server as a state
// version of the run, so that an apply killed halfway (the runner's
// machine dies) leaves what it had made in the workspace's current state.
// The returned function stops the watcher and waits for it.
func (j *jobExec) snapshots(ctx context.Context, before []byte) func() {
	upload := context.WithoutCancel(ctx) // an upload under way when terraform ends completes
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := before
		t := time.NewTicker(j.r.cfg.SnapshotEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := os.ReadFile(j.statePath)
			// terraform rewrites the file in place: a half-written file is
			// not valid JSON and waits for the next tick.
			if err != nil || bytes.Equal(cur, last) || !json.Valid(cur) {
				continue
			}
			if err := j.r.api.SaveState(upload, j.job.ID, cur); err != nil {
				if ctx.Err() == nil {
					j.log.Warn("a state snapshot was refused", "error", err)
				}
				continue
			}
			last = cur
		}
	}()
	return func() { cancel(); <-done }
}

// countChanges counts additions, changes, destructions and imports in a
// plan's JSON (a replacement counts as one addition and one destruction).
func countChanges(planJSON []byte) (add, change, destroy, imports int) {
	var p struct {
		ResourceChanges []struct {
			Change struct {
				Actions   []string        `json:"actions"`
				Importing json.RawMessage `json:"importing"`
			} `json:"change"`
		} `json:"resource_changes"`
	}
	if json.Unmarshal(planJSON, &p) != nil {
		return
	}
	for _, rc := range p.ResourceChanges {
		for _, a := range rc.Change.Actions {
			switch a {
			case "create":
				add++
			case "update":
				change++
			case "delete":
				destroy++
			}
		}
		if len(rc.Change.Importing) > 0 && string(rc.Change.Importing) != "null" {
			imports++
		}
	}
	return
}

func sensitiveKeys(vars []Variable) map[string]bool {
	out := map[string]bool{}
	for _, v := range vars {
		if v.Sensitive && v.Category == "terraform" {
			out[v.Key] = true
		}
	}
	return out
}

// withRunSecrets adds the run's sensitive variables (a stack deployment's
// sensitive inputs) to the workspace's, for masking the log and redacting
// the plan: the HCL expression and, for a string literal, its text.
func withRunSecrets(vars []Variable, runVars []run.RunVar) []Variable {
	out := append([]Variable{}, vars...)
	for _, v := range runVars {
		if !v.Sensitive {
			continue
		}
		out = append(out, Variable{Key: v.Key, Value: v.Value, Category: "terraform", HCL: true, Sensitive: true})
		if text, err := strconv.Unquote(v.Value); err == nil {
			out = append(out, Variable{Key: v.Key, Value: text, Category: "terraform", Sensitive: true})
		}
	}
	return out
}

// SensitiveRunValues returns what a job masks of the sensitive ones among
// run variables: the HCL expression and, for a string literal, its text.
func SensitiveRunValues(runVars []run.RunVar) []string {
	var out []string
	for _, v := range withRunSecrets(nil, runVars) {
		out = append(out, v.Value)
	}
	return out
}

// sortedSecrets returns the sensitive values to mask, longest first so that
// a secret containing another is masked whole.
func sortedSecrets(vars []Variable) []string {
	var out []string
	for _, v := range vars {
		if v.Sensitive && len(v.Value) >= 3 {
			out = append(out, v.Value)
		}
	}
	sort.Slice(out, func(a, b int) bool { return len(out[a]) > len(out[b]) })
	return out
}
