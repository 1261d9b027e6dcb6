-- Stack deployment runs (seed 004): one per deployment per configuration;
-- a run is a sequence of steps (plan, apply), each backed by a run on the
-- deployment's workspace. stack_deployments gains the backing workspace
-- and the state lock: the run that holds it, for the whole run.
ALTER TABLE stack_deployments ADD COLUMN workspace_id TEXT NOT NULL DEFAULT '';
ALTER TABLE stack_deployments ADD COLUMN lock_run_id TEXT NOT NULL DEFAULT '';

CREATE TABLE stack_deployment_runs (
    id TEXT PRIMARY KEY,
    stack_id TEXT NOT NULL REFERENCES stacks (id) ON DELETE CASCADE,
    stack_configuration_id TEXT NOT NULL REFERENCES stack_configurations (id) ON DELETE CASCADE,
    deployment_name TEXT NOT NULL,
    group_id TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    mode TEXT NOT NULL,
    configuration_version_id TEXT NOT NULL DEFAULT '',
    variables TEXT NOT NULL DEFAULT '{}',
    applies INTEGER NOT NULL DEFAULT 0,
    approved_at BIGINT NOT NULL DEFAULT 0,
    error TEXT NOT NULL DEFAULT '',
    status_timestamps TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX stack_deployment_runs_deployment ON stack_deployment_runs (stack_id, deployment_name, created_at);
CREATE INDEX stack_deployment_runs_status ON stack_deployment_runs (status);

CREATE TABLE stack_deployment_steps (
    id TEXT PRIMARY KEY,
    stack_deployment_run_id TEXT NOT NULL REFERENCES stack_deployment_runs (id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    operation_type TEXT NOT NULL,
    status TEXT NOT NULL,
    tfe_run_id TEXT NOT NULL DEFAULT '',
    changes TEXT NOT NULL DEFAULT '{}',
    status_timestamps TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (stack_deployment_run_id, seq)
);
