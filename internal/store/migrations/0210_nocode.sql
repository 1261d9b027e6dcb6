-- No-code provisioning. One no-code module per registry module (UNIQUE);
-- deleting the registry module deletes it. Variable options belong to a
-- no-code module (options is a JSON array of strings; position keeps the
-- order given). no_code_workspaces remembers which workspaces were
-- provisioned from which no-code module at which version; deleting the
-- no-code module forgets them but the workspaces remain. no_code_upgrades
-- are initiated upgrades: the plan-only run (id), the version it plans and
-- the variables to set on confirmation (JSON).
CREATE TABLE no_code_modules (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    registry_module_id TEXT NOT NULL UNIQUE REFERENCES registry_modules (id) ON DELETE CASCADE,
    enabled BOOLEAN NOT NULL DEFAULT FALSE,
    version_pin TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);

CREATE TABLE no_code_variable_options (
    id TEXT PRIMARY KEY,
    no_code_module_id TEXT NOT NULL REFERENCES no_code_modules (id) ON DELETE CASCADE,
    variable_name TEXT NOT NULL,
    variable_type TEXT NOT NULL,
    options TEXT NOT NULL,
    position INTEGER NOT NULL,
    UNIQUE (no_code_module_id, variable_name)
);

CREATE TABLE no_code_workspaces (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    no_code_module_id TEXT NOT NULL REFERENCES no_code_modules (id) ON DELETE CASCADE,
    registry_module_id TEXT NOT NULL,
    module_version TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE no_code_upgrades (
    run_id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    no_code_module_id TEXT NOT NULL REFERENCES no_code_modules (id) ON DELETE CASCADE,
    module_version TEXT NOT NULL,
    vars TEXT NOT NULL,
    apply_run_id TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
