package moduletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/terracehq/terrace/internal/auth"
	"github.com/terracehq/terrace/internal/authz"
	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/loops"
	"github.com/terracehq/terrace/internal/seal"
	"github.com/terracehq/terrace/internal/store"
)

// VariablesColumn is the sealed column of this domain: a test run's -var
// values (seal.Keyring.Migrate seals rows written before encryption).
var VariablesColumn = seal.Column{Table: "module_test_runs", IDColumn: "id", Column: "variables", Purpose: "module_test_runs.variables"}

// Modules finds registry modules.
type Modules interface {
	// Get returns a module the caller may read (core.NotFound otherwise).
	Get(ctx context.Context, org, registry, namespace, name, provider string) (*Module, error)
	// ByID is Get by the module's ID.
	ByID(ctx context.Context, id string) (*Module, error)
}

// Configs reads the configuration versions a module's test runs use.
type Configs interface {
	// Config returns the owner (a module's ID) of a version and whether
	// its archive is uploaded.
	Config(ctx context.Context, id string) (owner string, uploaded bool, err error)
	// Open streams a version's archive (no access check: the executor's).
	Open(ctx context.Context, id string) (io.ReadCloser, error)
	// FromArchive makes an uploaded version of the module from a gzipped
	// tarball (a commit's, for a VCS-backed module), checked as every
	// upload is; no access check.
	FromArchive(ctx context.Context, moduleID string, tarGz []byte) (id string, err error)
}

// EnvVar is a module's test variable as a test run gets it.
type EnvVar struct {
	Key       string `json:"key"`
	Value     string `json:"value"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// Variables reads a module's test variables (no access check: the
// executor's).
type Variables interface {
	ModuleTestVariables(ctx context.Context, org, moduleID string) ([]EnvVar, error)
}

// Logs keeps test run logs (the run domain's log store, served by the
// /logs/{id} capability URL).
type Logs interface {
	OpenLog(ctx context.Context, q store.Q, logID string) error
	AppendLog(ctx context.Context, logID string, data []byte) error
	// AppendLogIn appends inside q's transaction: a log's end, with the
	// status that ends its run.
	AppendLogIn(ctx context.Context, q store.Q, logID string, data []byte) error
	// CloseLog folds a log after the commit that ended it.
	CloseLog(ctx context.Context, logID string) error
}

// endIn writes tail, the end of test run id's log, in q's transaction, the
// one that moves the run to its final status: a client that reads the log
// once it sees that status (go-tfe's log reader stops at an ended run)
// reads the end too. Logs.CloseLog folds the log after the commit. A log
// closed already takes nothing more (AppendLogIn's conflict).
func (s *Service) endIn(ctx context.Context, q store.Q, id, tail string) error {
	if err := s.Logs.AppendLogIn(ctx, q, id, []byte(tail)); err != nil && core.KindOf(err) != core.KindConflict {
		return err
	}
	return nil
}

// Options build a Service.
type Options struct {
	DB        *store.DB
	Modules   Modules
	Configs   Configs
	Variables Variables
	Logs      Logs
	// Keys seals run variables at rest (nil: stored as given).
	Keys *seal.Keyring
	// LeaseTTL is how long an executor holds a run without renewing its
	// lease before any replica may end it as errored. Defaults to 1 min.
	LeaseTTL time.Duration
	Logger   *slog.Logger
	// Hostname is the server's public host:port; Token, when set, mints a
	// token for a test run (its kind reads the organization's private
	// registry while the run runs, auth.KindTestRun), which terraform gets
	// as its credentials for Hostname, wherever the run runs.
	Hostname string
	Token    func(ctx context.Context, tr *TestRun) (string, error)
	// Sudo says whether an organization lets its runs gain privileges
	// (terraform-worker-sudo-enabled); when not, or when nil, terraform
	// starts unable to (Linux's no_new_privs, runner.StartCommand).
	Sudo func(ctx context.Context, org string) (bool, error)
}

// Service keeps test runs.
type Service struct {
	Options
	// OnStatus hooks hear every status a test run takes (queued at its
	// creation, then each move), inside the transaction that writes it:
	// the VCS domain reports them to the commit a run tests.
	OnStatus []func(ctx context.Context, q store.Q, tr *TestRun) error
	// OnEnded hooks hear, after the commit, of each run that ran and
	// ended: how it ended, and when it started and ended (metrics).
	OnEnded []func(status string, started, ended time.Time)
	wake    *loops.Wake
	// agentsMu guards queued, closed (and replaced) when a test run for
	// agents may have been queued: agents waiting in a claim wake.
	agentsMu sync.Mutex
	queued   chan struct{}
}

// ended tells the OnEnded hooks of tr, which ended in status at now.
func (s *Service) ended(tr *TestRun, status Status, now time.Time) {
	if tr.Timestamps.StartedAt == nil {
		return
	}
	for _, h := range s.OnEnded {
		h(string(status), *tr.Timestamps.StartedAt, now)
	}
}

// TestRunStatusCounts counts the test runs of every module by status
// (metrics, at scrape time).
func (s *Service) TestRunStatusCounts(ctx context.Context) (map[string]int, error) {
	counts := map[string]int{}
	rows, err := s.DB.Query(ctx, `SELECT status, COUNT(*) FROM module_test_runs GROUP BY status`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, err
		}
		counts[st] = n
	}
	return counts, rows.Err()
}

// NewService returns a Service.
func NewService(o Options) (*Service, error) {
	if o.DB == nil || o.Modules == nil || o.Configs == nil || o.Variables == nil || o.Logs == nil {
		return nil, errors.New("moduletest: DB, Modules, Configs, Variables and Logs are required")
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return &Service{Options: o, wake: loops.NewWake(), queued: make(chan struct{})}, nil
}

// RunningTestRunOrganization names the organization of a running test
// run, and NotFound for any other: a test run's token (auth.KindTestRun)
// works while its run runs.
func (s *Service) RunningTestRunOrganization(ctx context.Context, id string) (string, error) {
	var org string
	err := s.DB.QueryRow(ctx, `SELECT organization_name FROM module_test_runs WHERE id = ? AND status = ?`, id, string(StatusRunning)).Scan(&org)
	if store.IsNoRows(err) {
		return "", core.NotFound("test run %s is not running", id)
	}
	return org, err
}

// Path names a module by its registry path.
type Path struct{ Organization, Registry, Namespace, Name, Provider string }

// module returns the module at p the caller may read; with manage, one
// whose tests the caller may also run and configure.
func (s *Service) module(ctx context.Context, p Path, manage bool) (*Module, error) {
	if p.Registry != "private" {
		return nil, core.NotFound("only private registry modules run tests")
	}
	m, err := s.Modules.Get(ctx, p.Organization, p.Registry, p.Namespace, p.Name, p.Provider)
	if err != nil {
		return nil, err
	}
	if manage && authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: m.Organization}) != nil {
		return nil, core.Forbidden("you may not run or configure the tests of registry modules of organization %q", m.Organization)
	}
	return m, nil
}

// ConfigAccess says whether the caller may see the test configurations
// of the module with this ID (those who may run its tests): nil if so.
func (s *Service) ConfigAccess(ctx context.Context, moduleID string) error {
	m, err := s.Modules.ByID(ctx, moduleID)
	if err != nil {
		return err
	}
	if authz.Allows(ctx, authz.OrgManageModules, authz.Resource{Organization: m.Organization}) != nil {
		return core.NotFound("module %q not found", moduleID)
	}
	return nil
}

// ModuleForTests is the module of a test route whose tests the caller
// may run and configure (the test variables' routes).
func (s *Service) ModuleForTests(ctx context.Context, p Path) (*Module, error) {
	return s.module(ctx, p, true)
}

// CreateOptions are a test run's attributes (go-tfe's TestRunCreateOptions).
type CreateOptions struct {
	ConfigurationVersionID string
	RunOptions
	Variables []Variable
}

var (
	keyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	// maxVariables and maxValue bound what a run carries.
	maxVariables = 500
	maxValue     = 64 << 10
)

// checkPath refuses a test directory or filter that could name something
// outside the configuration, or pass for a flag.
func checkPath(what, p string) error {
	c := path.Clean(p)
	if p == "" || strings.HasPrefix(p, "-") || strings.ContainsAny(p, "\x00\n\r\\") || path.IsAbs(p) || c == ".." || strings.HasPrefix(c, "../") {
		return core.Invalid("%s %q must be a relative path inside the module, without '..'", what, p)
	}
	return nil
}

func (o *CreateOptions) check() error {
	if o.ConfigurationVersionID == "" {
		return core.Invalid("relationship configuration-version is required: upload the module first (POST .../configuration-versions)")
	}
	if o.TestDirectory != "" {
		if err := checkPath("test-directory", o.TestDirectory); err != nil {
			return err
		}
	}
	for _, f := range o.Filters {
		if err := checkPath("filter", f); err != nil {
			return err
		}
	}
	if o.Parallelism < 0 {
		return core.Invalid("parallelism must not be negative")
	}
	if len(o.Variables) > maxVariables {
		return core.Invalid("a test run takes at most %d variables", maxVariables)
	}
	seen := map[string]bool{}
	for _, v := range o.Variables {
		if !keyRe.MatchString(v.Key) {
			return core.Invalid("variable key %q is not a terraform identifier", v.Key)
		}
		if seen[v.Key] {
			return core.Invalid("variable %q is given twice", v.Key)
		}
		seen[v.Key] = true
		if len(v.Value) > maxValue {
			return core.Invalid("the value of variable %q is longer than %d bytes", v.Key, maxValue)
		}
		// The value is an HCL expression (the CLI sends -var values so):
		// parsed here, so that a broken one is refused with the run, not
		// found by terraform on the server. The message never quotes it.
		if _, diags := hclsyntax.ParseExpression([]byte(v.Value), v.Key, hcl.InitialPos); diags.HasErrors() {
			return core.Invalid("the value of variable %q is not an HCL expression: %s", v.Key, diags[0].Summary)
		}
	}
	return nil
}

// Create queues a test run of the module at p.
func (s *Service) Create(ctx context.Context, p Path, o CreateOptions) (*TestRun, error) {
	m, err := s.module(ctx, p, true)
	if err != nil {
		return nil, err
	}
	if !m.TestsEnabled {
		return nil, core.Invalid("tests are not enabled for module %s: set its test-config tests-enabled to true first", m)
	}
	if err := o.check(); err != nil {
		return nil, err
	}
	owner, uploaded, err := s.Configs.Config(ctx, o.ConfigurationVersionID)
	if err != nil && core.KindOf(err) != core.KindNotFound {
		return nil, err
	}
	if err != nil || owner != m.ID {
		return nil, core.Invalid("configuration version %q is not one of module %s's (create it with POST .../configuration-versions)", o.ConfigurationVersionID, m)
	}
	if !uploaded {
		return nil, core.Invalid("configuration version %q has no uploaded configuration yet", o.ConfigurationVersionID)
	}
	tr := newRun(m, o.ConfigurationVersionID, o.RunOptions, o.Variables)
	if pr := auth.FromContext(ctx); pr != nil {
		tr.CreatedByToken = pr.TokenID
	}
	if err := s.insert(ctx, tr, nil); err != nil {
		return nil, err
	}
	return tr, nil
}

// newRun is a queued test run of m's configuration cvID.
func newRun(m *Module, cvID string, o RunOptions, vars []Variable) *TestRun {
	now := core.Now()
	if vars == nil {
		vars = []Variable{}
	}
	tr := &TestRun{ID: core.NewID(PrefixTestRun), ModuleID: m.ID, Organization: m.Organization, ConfigurationVersionID: cvID,
		Status: StatusQueued, TestStatus: TestPending, Options: o, Variables: vars, AgentPoolID: m.AgentPoolID, CreatedAt: now, UpdatedAt: now}
	tr.Timestamps.stamp(StatusQueued, now)
	return tr
}

// insert writes a new test run with its open log, and origin's rows
// (nil: none), in one transaction whose OnStatus hooks hear it queued;
// then this replica's executor is woken.
func (s *Service) insert(ctx context.Context, tr *TestRun, origin func(ctx context.Context, q store.Q, testRunID string) error) error {
	opts, _ := json.Marshal(tr.Options)
	vars, _ := json.Marshal(tr.Variables)
	sealed, err := s.Keys.SealString(VariablesColumn.Purpose, string(vars))
	if err != nil {
		return err
	}
	ts, _ := json.Marshal(tr.Timestamps)
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO module_test_runs (id, module_id, organization_name, configuration_version_id, status, test_status, options, variables, status_timestamps, agent_pool_id, created_by_token, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, tr.ID, tr.ModuleID, tr.Organization, tr.ConfigurationVersionID, string(tr.Status), string(tr.TestStatus),
			string(opts), sealed, string(ts), tr.AgentPoolID, tr.CreatedByToken, core.Micros(tr.CreatedAt), core.Micros(tr.CreatedAt)); err != nil {
			return fmt.Errorf("creating test run: %w", err)
		}
		if err := s.Logs.OpenLog(ctx, tx, tr.ID); err != nil {
			return err
		}
		if origin != nil {
			if err := origin(ctx, tx, tr.ID); err != nil {
				return err
			}
		}
		return s.told(ctx, tx, tr)
	})
	if err != nil {
		return err
	}
	if tr.AgentPoolID != "" {
		s.rouseAgents()
	}
	s.wake.Signal()
	return nil
}

// told runs the OnStatus hooks on tr in q's transaction.
func (s *Service) told(ctx context.Context, q store.Q, tr *TestRun) error {
	for _, h := range s.OnStatus {
		if err := h(ctx, q, tr); err != nil {
			return err
		}
	}
	return nil
}

// CreateFromVCS queues a test run of a commit of a VCS-backed module
// whose tests are enabled (tarGz: the module's folder at the commit),
// for the system (the module's connection decided it); origin records,
// in the run's transaction, the commit it reports to. A module without
// tests enabled (or gone) gets none: nil, nil.
func (s *Service) CreateFromVCS(ctx context.Context, moduleID string, tarGz []byte, origin func(ctx context.Context, q store.Q, testRunID string) error) (*TestRun, error) {
	sys := auth.WithPrincipal(ctx, &auth.Principal{Kind: auth.KindUser, SiteAdmin: true})
	m, err := s.Modules.ByID(sys, moduleID)
	if core.KindOf(err) == core.KindNotFound {
		return nil, nil
	}
	if err != nil || !m.TestsEnabled {
		return nil, err
	}
	cvID, err := s.Configs.FromArchive(sys, m.ID, tarGz)
	if err != nil {
		return nil, err
	}
	tr := newRun(m, cvID, RunOptions{}, nil)
	if err := s.insert(ctx, tr, origin); err != nil {
		return nil, err
	}
	return tr, nil
}

// Wake is the executors' wake-up: a queued run wakes this replica's and,
// announced (the server's bell), every other replica's.
func (s *Service) Wake() *loops.Wake { return s.wake }

const cols = `id, module_id, organization_name, configuration_version_id, status, test_status, tests_passed, tests_failed, tests_errored, tests_skipped,
	options, variables, status_timestamps, signal, agent_pool_id, runner_id, lease_until, created_by_token, created_at, updated_at`

func (s *Service) scan(sc interface{ Scan(...any) error }) (*TestRun, error) {
	var tr TestRun
	var status, testStatus, opts, vars, ts, signal string
	var created, updated int64
	if err := sc.Scan(&tr.ID, &tr.ModuleID, &tr.Organization, &tr.ConfigurationVersionID, &status, &testStatus,
		&tr.Counts.Passed, &tr.Counts.Failed, &tr.Counts.Errored, &tr.Counts.Skipped, &opts, &vars, &ts, &signal, &tr.AgentPoolID, &tr.runnerID, &tr.leaseUntil, &tr.CreatedByToken, &created, &updated); err != nil {
		return nil, err
	}
	tr.Status, tr.TestStatus, tr.Signal = Status(status), TestStatus(testStatus), Signal(signal)
	if err := json.Unmarshal([]byte(opts), &tr.Options); err != nil {
		return nil, fmt.Errorf("decoding the options of test run %s: %w", tr.ID, err)
	}
	if err := json.Unmarshal([]byte(ts), &tr.Timestamps); err != nil {
		return nil, fmt.Errorf("decoding the timestamps of test run %s: %w", tr.ID, err)
	}
	plain, err := s.Keys.OpenString(VariablesColumn.Purpose, vars)
	if err != nil {
		return nil, fmt.Errorf("test run %s: %w", tr.ID, err)
	}
	if plain != "" {
		if err := json.Unmarshal([]byte(plain), &tr.Variables); err != nil {
			return nil, fmt.Errorf("decoding the variables of test run %s: %w", tr.ID, err)
		}
	}
	tr.CreatedAt, tr.UpdatedAt = core.FromMicros(created), core.FromMicros(updated)
	return &tr, nil
}

func (s *Service) read(ctx context.Context, q store.Q, id string, lock bool) (*TestRun, error) {
	query := `SELECT ` + cols + ` FROM module_test_runs WHERE id = ?`
	if lock {
		query += store.ForUpdate(q)
	}
	tr, err := s.scan(q.QueryRow(ctx, query, id))
	if store.IsNoRows(err) {
		return nil, core.NotFound("test run %q not found", id)
	}
	return tr, err
}

// List returns a page of the module's test runs, newest first, and how
// many it has.
func (s *Service) List(ctx context.Context, p Path, offset, limit int) ([]*TestRun, int, error) {
	m, err := s.module(ctx, p, false)
	if err != nil {
		return nil, 0, err
	}
	return store.Page(ctx, s.DB, s.scan, cols, "module_test_runs", `module_id = ?`, `created_at DESC, id DESC`, offset, limit, m.ID)
}

// Get returns one of the module's test runs.
func (s *Service) Get(ctx context.Context, p Path, id string) (*TestRun, error) {
	m, err := s.module(ctx, p, false)
	if err != nil {
		return nil, err
	}
	return s.ofModule(ctx, m, id)
}

func (s *Service) ofModule(ctx context.Context, m *Module, id string) (*TestRun, error) {
	if !core.HasPrefix(id, PrefixTestRun) {
		return nil, core.NotFound("test run %q not found", id)
	}
	tr, err := s.read(ctx, s.DB, id, false)
	if err != nil {
		return nil, err
	}
	if tr.ModuleID != m.ID {
		return nil, core.NotFound("test run %q not found", id)
	}
	return tr, nil
}

// move writes tr's move to status (checked by transition) with what else
// changed on tr, inside q's transaction, and tells the OnStatus hooks.
func (s *Service) move(ctx context.Context, q store.Q, tr *TestRun, to Status, now time.Time, set string, args ...any) error {
	if err := transition(tr.Status, to); err != nil {
		return err
	}
	tr.Status = to
	tr.Timestamps.stamp(to, now)
	tr.UpdatedAt = now
	ts, _ := json.Marshal(tr.Timestamps)
	if set != "" {
		set = ", " + set
	}
	if _, err := q.Exec(ctx, `UPDATE module_test_runs SET status = ?, status_timestamps = ?, updated_at = ?`+set+` WHERE id = ?`,
		append(append([]any{string(to), string(ts), core.Micros(now)}, args...), tr.ID)...); err != nil {
		return err
	}
	return s.told(ctx, q, tr)
}

// Cancel cancels a test run: a queued one at once, a running one by
// interrupting terraform (force: killing it).
func (s *Service) Cancel(ctx context.Context, p Path, id string, force bool) error {
	m, err := s.module(ctx, p, true)
	if err != nil {
		return err
	}
	if _, err := s.ofModule(ctx, m, id); err != nil {
		return err
	}
	closed := false
	err = s.DB.Tx(ctx, func(tx *store.Tx) error {
		tr, err := s.read(ctx, tx, id, true)
		if err != nil {
			return err
		}
		now := core.Now()
		switch {
		case tr.Status == StatusQueued:
			closed = true
			if err := s.move(ctx, tx, tr, StatusCanceled, now, ""); err != nil {
				return err
			}
			return s.endIn(ctx, tx, tr.ID, "\nThe test run was canceled before it started.\n")
		case tr.Status == StatusRunning:
			sig := SignalCancel
			if force {
				sig = SignalForce
				tr.Timestamps.ForceCanceledAt = &now
			} else if tr.Signal == SignalForce {
				return nil // already being killed
			}
			ts, _ := json.Marshal(tr.Timestamps)
			_, err := tx.Exec(ctx, `UPDATE module_test_runs SET signal = ?, status_timestamps = ?, updated_at = ? WHERE id = ?`, string(sig), string(ts), core.Micros(now), tr.ID)
			return err
		default:
			return core.Conflict("test run %s is already %s", tr.ID, tr.Status)
		}
	})
	if err != nil {
		return err
	}
	if closed {
		return s.Logs.CloseLog(ctx, id)
	}
	return nil
}

// Latest returns the newest test run of each of the modules (none for a
// module without), in one statement, for a caller who may read them (the
// registry's page).
func (s *Service) Latest(ctx context.Context, moduleIDs []string) (map[string]*TestRun, error) {
	out := map[string]*TestRun{}
	if len(moduleIDs) == 0 {
		return out, nil
	}
	in, args := store.In(moduleIDs)
	runs, err := store.All(ctx, s.DB, s.scan, `SELECT `+cols+` FROM module_test_runs r WHERE r.module_id IN (`+in+`)
		AND NOT EXISTS (SELECT 1 FROM module_test_runs n WHERE n.module_id = r.module_id AND (n.created_at > r.created_at OR (n.created_at = r.created_at AND n.id > r.id)))`, args...)
	if err != nil {
		return nil, err
	}
	for _, tr := range runs {
		out[tr.ModuleID] = tr
	}
	return out, nil
}
