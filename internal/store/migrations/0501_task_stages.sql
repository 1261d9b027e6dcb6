-- Task stages and task results of runs (internal/runtask,
-- docs/design/runtasks.md draws both state machines). A stage exists per
-- run and stage that had tasks when the run was created; a result per task.
CREATE TABLE task_stages (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    organization_name TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    stage TEXT NOT NULL,
    status TEXT NOT NULL,
    status_timestamps TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (run_id, stage)
);

-- A result is also the durable outbox row of its request to the task
-- service: next_attempt_at > 0 while the request is due (or claimed until
-- then by claimed_by), 0 once the service accepted it or gave up.
-- deadline ends the result (errored) when no final status came in time;
-- progress_deadline does so when a running result stops reporting.
CREATE TABLE task_results (
    id TEXT PRIMARY KEY,
    stage_id TEXT NOT NULL REFERENCES task_stages (id) ON DELETE CASCADE,
    run_id TEXT NOT NULL,
    task_id TEXT NOT NULL,
    task_name TEXT NOT NULL,
    task_url TEXT NOT NULL,
    workspace_task_id TEXT NOT NULL,
    enforcement_level TEXT NOT NULL,
    status TEXT NOT NULL,
    message TEXT NOT NULL DEFAULT '',
    url TEXT NOT NULL DEFAULT '',
    outcomes TEXT NOT NULL,
    status_timestamps TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    claimed_by TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    deadline BIGINT NOT NULL DEFAULT 0,
    progress_deadline BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX task_results_stage ON task_results (stage_id);
CREATE INDEX task_results_due ON task_results (status, next_attempt_at);
