-- Organization run tasks and their attachments to workspaces
-- (internal/runtask, docs/design/runtasks.md). hmac_key is write-only at
-- the API: it keys X-TFC-Task-Signature and is never returned nor logged.
-- It is kept as given, in its own column, until encryption at rest wraps it.
CREATE TABLE run_tasks (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT NOT NULL,
    url TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    category TEXT NOT NULL,
    hmac_key TEXT NOT NULL DEFAULT '',
    enabled BOOLEAN NOT NULL,
    global_enabled BOOLEAN NOT NULL,
    global_stages TEXT NOT NULL,
    global_enforcement TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, name)
);

-- A task attached to a workspace. stages is a JSON list in the order
-- given. A task is not deleted while attached (the service refuses); the
-- cascade only serves the deletion of a whole organization.
CREATE TABLE workspace_run_tasks (
    id TEXT PRIMARY KEY,
    task_id TEXT NOT NULL REFERENCES run_tasks (id) ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    enforcement_level TEXT NOT NULL,
    stages TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (workspace_id, task_id)
);
CREATE INDEX workspace_run_tasks_task ON workspace_run_tasks (task_id);
