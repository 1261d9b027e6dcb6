-- Module tests on agents (internal/moduletest, internal/jobapi): a module
-- whose test-config says agent-execution-mode "agent" names the agent pool
-- whose agents run its tests (tests_agent_pool_id; '' runs them on the
-- server). A test run takes its module's pool when it is made
-- (agent_pool_id): the server's executors claim only runs of no pool, an
-- agent only runs of its own.
ALTER TABLE registry_modules ADD COLUMN tests_agent_pool_id TEXT NOT NULL DEFAULT '';
ALTER TABLE module_test_runs ADD COLUMN agent_pool_id TEXT NOT NULL DEFAULT '';
CREATE INDEX module_test_runs_pool ON module_test_runs (agent_pool_id, status, created_at);
CREATE INDEX registry_modules_tests_pool ON registry_modules (tests_agent_pool_id) WHERE tests_agent_pool_id <> '';
