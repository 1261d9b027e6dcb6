-- Runs, their events, the job queue that runners claim from, and live log
-- chunks. A run row keeps the fields queries filter on as columns and the
-- rest as a JSON document (doc).
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    organization_name TEXT NOT NULL,
    configuration_version_id TEXT NOT NULL,
    status TEXT NOT NULL,
    plan_only BOOLEAN NOT NULL,
    plan_id TEXT NOT NULL UNIQUE,
    apply_id TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    doc TEXT NOT NULL
);
CREATE INDEX runs_workspace ON runs (workspace_id, created_at);
CREATE INDEX runs_org_status ON runs (organization_name, status);
CREATE INDEX runs_configuration_version ON runs (configuration_version_id);

CREATE TABLE run_events (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    action TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    actor TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX run_events_run ON run_events (run_id, created_at);

-- A job is one phase (plan or apply) of a run for a runner to execute. A
-- runner holds a lease that its heartbeats extend; an expired lease frees
-- or fails the job.
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    status TEXT NOT NULL,
    runner_id TEXT NOT NULL DEFAULT '',
    lease_expires_at BIGINT NOT NULL DEFAULT 0,
    attempts INTEGER NOT NULL DEFAULT 0,
    signal TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_status ON jobs (status, created_at);
