-- Resource-graph orchestrator (seed 003). Every configuration object of an
-- organization is one row: kind is project, env-type, environment,
-- resource-type, provider, module or module-rule; scope is the project of
-- an environment and the provider type of a provider ('' otherwise); body
-- is the object's JSON. A module rule's tuple (module, class, resource id,
-- project, env type, env) is unique per organization.
CREATE TABLE orchestrator_objects (
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    kind TEXT NOT NULL,
    scope TEXT NOT NULL DEFAULT '',
    id TEXT NOT NULL,
    uuid TEXT NOT NULL,
    version_id TEXT NOT NULL DEFAULT '',
    tuple TEXT NOT NULL DEFAULT '',
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (organization_name, kind, scope, id)
);

CREATE UNIQUE INDEX orchestrator_objects_tuple ON orchestrator_objects (organization_name, kind, tuple) WHERE tuple <> '';

-- Every version of every module, so a deployment's graph can name the
-- version it used.
CREATE TABLE orchestrator_module_versions (
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    module_id TEXT NOT NULL,
    version_id TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (organization_name, module_id, version_id)
);

-- The workspace backing an environment (created on its first deploy).
CREATE TABLE orchestrator_env_workspaces (
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    project_id TEXT NOT NULL,
    env_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    PRIMARY KEY (organization_name, project_id, env_id)
);

-- Deployments: manifest and graph state (orchestrator.NodeState list) as
-- JSON; providers are the provider refs the graph used (kept in the next
-- configuration so Terraform can destroy removed resources).
CREATE TABLE orchestrator_deployments (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    project_id TEXT NOT NULL,
    env_id TEXT NOT NULL,
    mode TEXT NOT NULL,
    status TEXT NOT NULL,
    status_message TEXT NOT NULL DEFAULT '',
    manifest TEXT NOT NULL,
    graph TEXT NOT NULL,
    providers TEXT NOT NULL DEFAULT '[]',
    diff TEXT NOT NULL DEFAULT '[]',
    workspace_id TEXT NOT NULL DEFAULT '',
    run_id TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE INDEX orchestrator_deployments_env ON orchestrator_deployments (organization_name, project_id, env_id, created_at);
