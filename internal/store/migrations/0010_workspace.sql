-- Workspaces, their tags and tag bindings, remote-state sharing, and
-- project tag bindings. Settings no query filters on live in attrs (JSON);
-- the lock lives in the row so lock/unlock is one row update under a
-- row lock. project_id has no foreign key: the project service refuses to
-- delete a project that still holds workspaces.
CREATE TABLE workspaces (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    project_id TEXT NOT NULL,
    name TEXT NOT NULL,
    locked_by_kind TEXT NOT NULL DEFAULT '',
    locked_by_id TEXT NOT NULL DEFAULT '',
    lock_reason TEXT NOT NULL DEFAULT '',
    attrs TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);
CREATE INDEX workspaces_project ON workspaces (project_id);

CREATE TABLE tags (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);

CREATE TABLE workspace_tags (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    tag_id TEXT NOT NULL REFERENCES tags (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (workspace_id, tag_id)
);
CREATE INDEX workspace_tags_tag ON workspace_tags (tag_id);

CREATE TABLE workspace_tag_bindings (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    tag_key TEXT NOT NULL,
    tag_value TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    UNIQUE (workspace_id, tag_key)
);

CREATE TABLE project_tag_bindings (
    id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES projects (id) ON DELETE CASCADE,
    tag_key TEXT NOT NULL,
    tag_value TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    UNIQUE (project_id, tag_key)
);

CREATE TABLE remote_state_consumers (
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    consumer_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    PRIMARY KEY (workspace_id, consumer_id)
);
CREATE INDEX remote_state_consumers_consumer ON remote_state_consumers (consumer_id);

-- Agent pools (minimal: no agents or agent tokens yet), so that workspaces
-- and projects can use the "agent" execution mode.
CREATE TABLE agent_pools (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT NOT NULL,
    organization_scoped BOOLEAN NOT NULL DEFAULT TRUE,
    created_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);
