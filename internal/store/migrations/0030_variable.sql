-- Variable sets and variables. Workspaces and projects are referenced by
-- TEXT id without foreign keys (their tables belong to another domain and may
-- be created by a later migration); the workspace domain calls
-- variable.DeleteWorkspaceVariables when it deletes a workspace. Everything
-- hangs from the organization, so deleting one removes its variables.
CREATE TABLE variable_sets (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    is_global BOOLEAN NOT NULL DEFAULT FALSE,
    is_priority BOOLEAN NOT NULL DEFAULT FALSE,
    -- parent_project_id is set for a project-owned variable set, '' otherwise.
    parent_project_id TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);

CREATE TABLE variable_set_workspaces (
    varset_id TEXT NOT NULL REFERENCES variable_sets (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL,
    PRIMARY KEY (varset_id, workspace_id)
);
CREATE INDEX variable_set_workspaces_workspace ON variable_set_workspaces (workspace_id);

CREATE TABLE variable_set_projects (
    varset_id TEXT NOT NULL REFERENCES variable_sets (id) ON DELETE CASCADE,
    project_id TEXT NOT NULL,
    PRIMARY KEY (varset_id, project_id)
);
CREATE INDEX variable_set_projects_project ON variable_set_projects (project_id);

-- A variable belongs to exactly one workspace or one variable set: the other
-- column is NULL, so each unique index only constrains its own kind (NULLs
-- are distinct in both databases). category: terraform | env.
CREATE TABLE variables (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    workspace_id TEXT,
    varset_id TEXT REFERENCES variable_sets (id) ON DELETE CASCADE,
    var_key TEXT NOT NULL,
    value TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    category TEXT NOT NULL,
    hcl BOOLEAN NOT NULL DEFAULT FALSE,
    sensitive BOOLEAN NOT NULL DEFAULT FALSE,
    version_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    CHECK ((workspace_id IS NULL) <> (varset_id IS NULL))
);
CREATE UNIQUE INDEX variables_workspace_key ON variables (workspace_id, category, var_key);
CREATE UNIQUE INDEX variables_varset_key ON variables (varset_id, category, var_key);
