-- Health assessments (internal/assessment, docs/design/assessments.md).
-- An assessment is a refresh-only, plan-only run marked assessment: it is
-- left out of run lists and queue counts, and its job waits in its own
-- queue ('assessments'), claimed by the assessment runner only, so that
-- assessments never take a slot of the run queue.
ALTER TABLE runs ADD COLUMN assessment BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE jobs ADD COLUMN queue TEXT NOT NULL DEFAULT 'runs';
CREATE INDEX jobs_queue_status ON jobs (queue, status, created_at);

-- One row per assessment of a workspace: queued when the run is created,
-- finished (succeeded or errored) when it ends. drifted_resources lists the
-- addresses terraform reported in resource_drift.
CREATE TABLE assessment_results (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    organization_name TEXT NOT NULL,
    run_id TEXT NOT NULL,
    status TEXT NOT NULL,
    drifted BOOLEAN NOT NULL DEFAULT FALSE,
    succeeded BOOLEAN NOT NULL DEFAULT FALSE,
    error_msg TEXT NOT NULL DEFAULT '',
    resources_drifted INTEGER NOT NULL DEFAULT 0,
    resources_undrifted INTEGER NOT NULL DEFAULT 0,
    checks_passed INTEGER NOT NULL DEFAULT 0,
    checks_failed INTEGER NOT NULL DEFAULT 0,
    checks_errored INTEGER NOT NULL DEFAULT 0,
    checks_unknown INTEGER NOT NULL DEFAULT 0,
    drifted_resources TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX assessment_results_workspace ON assessment_results (workspace_id, created_at);
CREATE UNIQUE INDEX assessment_results_run ON assessment_results (run_id);
