-- Stacks (seed 004). A stack belongs to a project; its configurations are
-- numbered per stack; a completed configuration has one deployment group
-- row per group of its deployment files; stack_deployments holds every
-- deployment the stack has declared; diagnostics belong to a
-- configuration. Lists (trigger patterns, components, group config,
-- diagnostic details) are JSON text.
CREATE TABLE stacks (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES projects (id),
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    speculative_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    execution_mode TEXT NOT NULL DEFAULT 'remote',
    agent_pool_id TEXT NOT NULL DEFAULT '',
    working_directory TEXT NOT NULL DEFAULT '',
    trigger_patterns TEXT NOT NULL DEFAULT '[]',
    next_sequence INTEGER NOT NULL DEFAULT 1,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (project_id, name)
);

CREATE TABLE stack_configurations (
    id TEXT PRIMARY KEY,
    stack_id TEXT NOT NULL REFERENCES stacks (id) ON DELETE CASCADE,
    sequence_number INTEGER NOT NULL,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    speculative BOOLEAN NOT NULL DEFAULT FALSE,
    destroy_all BOOLEAN NOT NULL DEFAULT FALSE,
    blob_key TEXT NOT NULL DEFAULT '',
    sha256 TEXT NOT NULL DEFAULT '',
    components TEXT NOT NULL DEFAULT '[]',
    deployments TEXT NOT NULL DEFAULT '[]',
    status_timestamps TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (stack_id, sequence_number)
);

CREATE TABLE stack_deployment_groups (
    id TEXT PRIMARY KEY,
    stack_configuration_id TEXT NOT NULL REFERENCES stack_configurations (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    status TEXT NOT NULL,
    config TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (stack_configuration_id, name)
);

CREATE TABLE stack_deployments (
    id TEXT PRIMARY KEY,
    stack_id TEXT NOT NULL REFERENCES stacks (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    -- The last completed configuration that declared the deployment.
    last_configuration_id TEXT NOT NULL,
    removed BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (stack_id, name)
);

CREATE TABLE stack_diagnostics (
    id TEXT PRIMARY KEY,
    stack_configuration_id TEXT NOT NULL REFERENCES stack_configurations (id) ON DELETE CASCADE,
    severity TEXT NOT NULL,
    summary TEXT NOT NULL,
    detail TEXT NOT NULL DEFAULT '',
    diags TEXT NOT NULL DEFAULT '[]',
    acknowledged BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL
);

CREATE INDEX stack_diagnostics_configuration ON stack_diagnostics (stack_configuration_id, created_at);
