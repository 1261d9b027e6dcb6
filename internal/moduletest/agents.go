package moduletest

import (
	"context"
	"io"

	"github.com/terracehq/terrace/internal/core"
	"github.com/terracehq/terrace/internal/store"
)

// The test runs of a module whose tests run on an agent pool are run by
// that pool's agents, through the job protocol (internal/jobapi): an
// agent claims one, gets what Work needs, runs Execute and reports the
// outcome. The calls here are the protocol's; the caller has checked the
// agent's token and that the agent is of the pool it names.

// UsingPool counts the unfinished test runs of agent pool id (a pool in
// use is not deleted: they would never end).
func UsingPool(ctx context.Context, q store.Q, id string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT COUNT(*) FROM module_test_runs WHERE agent_pool_id = ? AND status IN (?, ?)`,
		id, string(StatusQueued), string(StatusRunning)).Scan(&n)
	return n, err
}

// Queued is closed when a test run for agents may have been queued since
// it was returned: an agent's claim waits on it.
func (s *Service) Queued() <-chan struct{} {
	s.agentsMu.Lock()
	defer s.agentsMu.Unlock()
	return s.queued
}

// rouseAgents wakes the agents waiting in a claim on this replica.
func (s *Service) rouseAgents() {
	s.agentsMu.Lock()
	close(s.queued)
	s.queued = make(chan struct{})
	s.agentsMu.Unlock()
}

// WakeLocal wakes this replica's executors and the agents waiting on it,
// after another replica announced work.
func (s *Service) WakeLocal() {
	s.wake.Local()
	s.rouseAgents()
}

// ClaimForAgent takes the oldest queued test run of pool for the agent
// runnerID (nil when there is none).
func (s *Service) ClaimForAgent(ctx context.Context, runnerID, pool string) (*TestRun, error) {
	if pool == "" {
		return nil, core.Invalid("only agents of a pool claim test runs")
	}
	return s.claim(ctx, runnerID, pool)
}

// Held returns test run id, running and held by runnerID of pool:
// NotFound for a run of another pool (or none), Conflict for one that is
// not (or no longer) the runner's.
func (s *Service) Held(ctx context.Context, id, runnerID, pool string) (*TestRun, error) {
	if !core.HasPrefix(id, PrefixTestRun) {
		return nil, core.NotFound("test run %q not found", id)
	}
	tr, err := s.read(ctx, s.DB, id, false)
	if err != nil {
		return nil, err
	}
	if pool == "" || tr.AgentPoolID != pool {
		return nil, core.NotFound("test run %q not found", id)
	}
	if tr.Status != StatusRunning || tr.runnerID != runnerID {
		return nil, core.Conflict("test run %s is %s, and not held by %s", id, tr.Status, runnerID)
	}
	return tr, nil
}

// Finish records the outcome the runner holding test run id reports.
func (s *Service) Finish(ctx context.Context, id, runnerID string, o Outcome) error {
	if err := o.check(); err != nil {
		return err
	}
	return s.finish(ctx, id, runnerID, o)
}

// AppendLog adds a chunk (masked by its executor) to a test run's log.
func (s *Service) AppendLog(ctx context.Context, id string, data []byte) error {
	return s.Logs.AppendLog(ctx, id, data)
}

// Configuration opens the archive of tr's configuration.
func (s *Service) Configuration(ctx context.Context, tr *TestRun) (io.ReadCloser, error) {
	return s.Configs.Open(ctx, tr.ConfigurationVersionID)
}

// TestVariables returns the test variables of tr's module.
func (s *Service) TestVariables(ctx context.Context, tr *TestRun) ([]EnvVar, error) {
	return s.Variables.ModuleTestVariables(ctx, tr.Organization, tr.ModuleID)
}
