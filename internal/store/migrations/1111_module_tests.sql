-- Module tests (internal/moduletest): a private registry module runs its
-- `terraform test` files on Terrace when tests_enabled is set (go-tfe's
-- test-config). A test run's configuration is a configuration version
-- and its environment variables are variables, both owned by the module:
-- their workspace_id column holds the module's ID (mod-…), which no
-- workspace has, and the module's deletion removes them.
ALTER TABLE registry_modules ADD COLUMN tests_enabled BOOLEAN NOT NULL DEFAULT FALSE;

-- One row per test run, its status moved only by moduletest's transition
-- table. options: filters, test directory, verbose, parallelism (JSON);
-- variables: the run's -var values (JSON, sealed at rest). runner_id and
-- lease_until are the running executor's lease; signal is a cancel asked
-- for while it runs ('', cancel, force).
CREATE TABLE module_test_runs (
    id TEXT PRIMARY KEY,
    module_id TEXT NOT NULL REFERENCES registry_modules (id) ON DELETE CASCADE,
    organization_name TEXT NOT NULL,
    configuration_version_id TEXT NOT NULL,
    status TEXT NOT NULL,
    test_status TEXT NOT NULL DEFAULT 'pending',
    tests_passed INTEGER NOT NULL DEFAULT 0,
    tests_failed INTEGER NOT NULL DEFAULT 0,
    tests_errored INTEGER NOT NULL DEFAULT 0,
    tests_skipped INTEGER NOT NULL DEFAULT 0,
    options TEXT NOT NULL DEFAULT '{}',
    variables TEXT NOT NULL DEFAULT '',
    status_timestamps TEXT NOT NULL DEFAULT '{}',
    runner_id TEXT NOT NULL DEFAULT '',
    lease_until BIGINT NOT NULL DEFAULT 0,
    signal TEXT NOT NULL DEFAULT '',
    created_by_token TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX module_test_runs_module ON module_test_runs (module_id, created_at);
CREATE INDEX module_test_runs_status ON module_test_runs (status, created_at);
