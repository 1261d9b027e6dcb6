-- Comments on runs (POST /runs/{id}/comments, and the comment given with
-- apply, discard or cancel). Each comment also appears in the run's
-- history as a "commented" event that points at it.
CREATE TABLE run_comments (
    id TEXT PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    body TEXT NOT NULL,
    actor TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX run_comments_run ON run_comments (run_id, created_at);

ALTER TABLE run_events ADD COLUMN comment_id TEXT NOT NULL DEFAULT '';
