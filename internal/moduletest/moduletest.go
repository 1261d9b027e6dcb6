// Package moduletest runs a private registry module's `terraform test`
// files on Terrace: HCP Terraform's test-integrated modules, as terraform
// test -cloud-run=HOST/ORG/NAME/PROVIDER and go-tfe's TestRuns and
// TestVariables use them.
//
// A module whose test-config enables tests (internal/registry) takes test
// runs. The CLI creates a configuration version owned by the module
// (configversion.CreateForModule), uploads the module's folder to it,
// and creates a test run naming it, with its filters, test directory,
// verbosity and -var values. An executor on the server claims the queued
// run (a lease it renews while it works, so that a replica that dies
// leaves a run the others end as errored), runs terraform init and
// terraform test -json with the module's test variables in its
// environment, streams the output to the run's log (sensitive values
// masked) and records the summary terraform prints: the run finishes
// with the tests' status (pass, fail, error, skip) and counts. A cancel
// interrupts terraform (which tears down what the tests made); a force
// cancel kills it. docs/design/moduletests.md draws the lifecycle.
package moduletest

import (
	"fmt"
	"slices"
	"time"

	"github.com/terracehq/terrace/internal/core"
)

// PrefixTestRun starts a test run's ID (HCP Terraform's).
const PrefixTestRun = "trun"

// RunIDsSQL selects the IDs of a module's test runs (argument: the
// module's ID), which are their logs' IDs too.
const RunIDsSQL = `SELECT id FROM module_test_runs WHERE module_id = ?`

// Status is a test run's status (go-tfe's TestRunStatus).
type Status string

// The statuses a test run takes. A run is created queued (its
// configuration is uploaded by then), and ends finished (terraform test
// ran to its summary, whatever the tests' verdict), errored (it could not
// run, or stopped without a summary) or canceled.
const (
	StatusQueued   Status = "queued"
	StatusRunning  Status = "running"
	StatusFinished Status = "finished"
	StatusErrored  Status = "errored"
	StatusCanceled Status = "canceled"
)

// Statuses are every status a test run takes, in lifecycle order.
var Statuses = []Status{StatusQueued, StatusRunning, StatusFinished, StatusErrored, StatusCanceled}

// moves is every transition a test run may make: nothing writes a status
// without transition's consent.
var moves = map[Status][]Status{
	StatusQueued:  {StatusRunning, StatusCanceled},
	StatusRunning: {StatusFinished, StatusErrored, StatusCanceled},
}

// transition checks a move from one status to another.
func transition(from, to Status) error {
	if !slices.Contains(moves[from], to) {
		return core.Conflict("a test run that is %s cannot become %s", from, to)
	}
	return nil
}

// Ended reports whether s is final.
func (s Status) Ended() bool { return len(moves[s]) == 0 }

// TestStatus is the tests' verdict (go-tfe's TestStatus): terraform
// test's summary status, pending until it ran.
type TestStatus string

// The verdicts terraform test reports.
const (
	TestPending TestStatus = "pending"
	TestPass    TestStatus = "pass"
	TestFail    TestStatus = "fail"
	TestError   TestStatus = "error"
	TestSkip    TestStatus = "skip"
)

func validTestStatus(s string) bool {
	switch TestStatus(s) {
	case TestPending, TestPass, TestFail, TestError, TestSkip:
		return true
	}
	return false
}

// Signal is a cancel asked of a running test run.
type Signal string

// The signals: none, cancel (terraform is interrupted and tears down what
// the tests made), force (terraform is killed).
const (
	NoSignal     Signal = ""
	SignalCancel Signal = "cancel"
	SignalForce  Signal = "force"
)

// RunOptions are how terraform test runs (the CLI's flags).
type RunOptions struct {
	Filters       []string `json:"filters,omitempty"`
	TestDirectory string   `json:"test-directory,omitempty"`
	Verbose       bool     `json:"verbose,omitempty"`
	Parallelism   int      `json:"parallelism,omitempty"`
}

// Variable is a run variable: a -var of the CLI, its value an HCL
// expression (go-tfe's RunVariable).
type Variable struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Timestamps are when a test run reached its statuses.
type Timestamps struct {
	QueuedAt        *time.Time `json:"queued-at,omitempty"`
	StartedAt       *time.Time `json:"started-at,omitempty"`
	FinishedAt      *time.Time `json:"finished-at,omitempty"`
	ErroredAt       *time.Time `json:"errored-at,omitempty"`
	CanceledAt      *time.Time `json:"canceled-at,omitempty"`
	ForceCanceledAt *time.Time `json:"force-canceled-at,omitempty"`
}

// stamp records when a run moved to s.
func (t *Timestamps) stamp(s Status, at time.Time) {
	switch s {
	case StatusQueued:
		t.QueuedAt = &at
	case StatusRunning:
		t.StartedAt = &at
	case StatusFinished:
		t.FinishedAt = &at
	case StatusErrored:
		t.ErroredAt = &at
	case StatusCanceled:
		t.CanceledAt = &at
	}
}

// Counts are terraform test's summary: how many run blocks passed,
// failed, errored and were skipped.
type Counts struct {
	Passed  int `json:"passed"`
	Failed  int `json:"failed"`
	Errored int `json:"errored"`
	Skipped int `json:"skipped"`
}

// TestRun is one execution of a module's tests.
type TestRun struct {
	ID                     string
	ModuleID               string
	Organization           string
	ConfigurationVersionID string
	Status                 Status
	TestStatus             TestStatus
	Counts                 Counts
	Options                RunOptions
	Variables              []Variable
	Timestamps             Timestamps
	Signal                 Signal
	// AgentPoolID is the pool whose agents run it ("": the server's
	// executors), its module's when it was made.
	AgentPoolID string
	// runnerID and leaseUntil (µs) are the executor's lease of a
	// running run.
	runnerID             string
	leaseUntil           int64
	CreatedByToken       string
	CreatedAt, UpdatedAt time.Time
}

// Module is a registry module as this domain sees it.
type Module struct {
	ID, Organization, RegistryName, Namespace, Name, Provider string
	TestsEnabled                                              bool
	// AgentPoolID is the pool whose agents run its tests ("": the
	// server).
	AgentPoolID string
}

// String names the module as its registry path does.
func (m *Module) String() string {
	return fmt.Sprintf("%s/%s/%s", m.Namespace, m.Name, m.Provider)
}
