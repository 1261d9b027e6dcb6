-- Policies and policy sets (internal/policy, docs/design/policies.md).
-- A policy is one OPA (or Sentinel, kept but never evaluated) policy
-- managed through the API; content holds its source once uploaded.
CREATE TABLE policies (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON DELETE CASCADE ON UPDATE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    query TEXT NOT NULL DEFAULT '',
    enforcement_level TEXT NOT NULL,
    enforce_path TEXT NOT NULL,
    has_content BOOLEAN NOT NULL DEFAULT FALSE,
    content TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);

-- A policy set groups policies (or, when versioned, the files of its
-- current version) and says where they apply.
CREATE TABLE policy_sets (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON DELETE CASCADE ON UPDATE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    kind TEXT NOT NULL,
    global BOOLEAN NOT NULL DEFAULT FALSE,
    overridable BOOLEAN NOT NULL DEFAULT FALSE,
    agent_enabled BOOLEAN NOT NULL DEFAULT FALSE,
    policy_tool_version TEXT NOT NULL DEFAULT '',
    policies_path TEXT NOT NULL DEFAULT '',
    versioned BOOLEAN NOT NULL DEFAULT FALSE,
    current_version_id TEXT NOT NULL DEFAULT '',
    newest_version_id TEXT NOT NULL DEFAULT '',
    policy_update_patterns TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);

CREATE TABLE policy_set_policies (
    policy_set_id TEXT NOT NULL REFERENCES policy_sets (id) ON DELETE CASCADE,
    policy_id TEXT NOT NULL REFERENCES policies (id) ON DELETE CASCADE,
    PRIMARY KEY (policy_set_id, policy_id)
);

-- Where a set applies: kind is workspace, workspace-exclusion, project or
-- project-exclusion; target_id the workspace or project.
CREATE TABLE policy_set_scopes (
    policy_set_id TEXT NOT NULL REFERENCES policy_sets (id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    target_id TEXT NOT NULL,
    PRIMARY KEY (policy_set_id, kind, target_id)
);
CREATE INDEX policy_set_scopes_target ON policy_set_scopes (target_id);

-- Parameters: value is sealed at rest (seal.Column) and never returned
-- when sensitive.
CREATE TABLE policy_set_parameters (
    id TEXT PRIMARY KEY,
    policy_set_id TEXT NOT NULL REFERENCES policy_sets (id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    value TEXT NOT NULL DEFAULT '',
    sensitive BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    UNIQUE (policy_set_id, key)
);

-- Versions of a versioned set: files is the JSON map path -> source of
-- the policy files unpacked (through internal/slug) from the upload.
CREATE TABLE policy_set_versions (
    id TEXT PRIMARY KEY,
    policy_set_id TEXT NOT NULL REFERENCES policy_sets (id) ON DELETE CASCADE,
    status TEXT NOT NULL,
    status_timestamps TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    files TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- One policy evaluation per post-plan task stage and policy kind; one
-- outcome per policy set evaluated (docs/design/policies.md).
CREATE TABLE policy_evaluations (
    id TEXT PRIMARY KEY,
    task_stage_id TEXT NOT NULL REFERENCES task_stages (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    organization_name TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    status_timestamps TEXT NOT NULL,
    result_count TEXT NOT NULL DEFAULT '{}',
    claimed_until BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (task_stage_id, kind)
);

CREATE TABLE policy_set_outcomes (
    id TEXT PRIMARY KEY,
    policy_evaluation_id TEXT NOT NULL REFERENCES policy_evaluations (id) ON DELETE CASCADE,
    policy_set_id TEXT NOT NULL,
    policy_set_name TEXT NOT NULL,
    policy_set_description TEXT NOT NULL DEFAULT '',
    overridable BOOLEAN NOT NULL DEFAULT FALSE,
    error TEXT NOT NULL DEFAULT '',
    outcomes TEXT NOT NULL DEFAULT '[]',
    result_count TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL
);
CREATE INDEX policy_set_outcomes_eval ON policy_set_outcomes (policy_evaluation_id);
