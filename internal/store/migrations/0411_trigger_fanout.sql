-- The fan-out queue (internal/trigger/fanout.go): one row per applied run
-- whose dependents are still to be queued, inserted when the apply is
-- seen and deleted once every dependent run exists, so that a server
-- killed in between queues them after its restart.
CREATE TABLE trigger_fanouts (
    run_id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT NOT NULL DEFAULT '',
    next_attempt_at BIGINT NOT NULL,
    last_error TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX trigger_fanouts_due ON trigger_fanouts (status, next_attempt_at);

-- Which fan-out made each claim, and the run it created ('' until then):
-- a fan-out processed again after a crash finishes its own unfinished
-- claims instead of skipping them.
ALTER TABLE trigger_origins ADD COLUMN source_run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE trigger_origins ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
