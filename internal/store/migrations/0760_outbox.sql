-- The one outbox (internal/outbox, docs/design/outbox.md): work to do at
-- least once after a transaction committed, for every domain that needs
-- it. topic is the domain's queue (notification, run-task,
-- trigger-fan-out), item_key the item within it; lane groups items handled
-- one at a time; payload is the domain's data. A handled item is deleted;
-- a failed one is kept a week with last_error.
CREATE TABLE outbox_items (
    topic TEXT NOT NULL,
    item_key TEXT NOT NULL,
    lane TEXT NOT NULL DEFAULT '',
    payload TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_by TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (topic, item_key)
);
CREATE INDEX outbox_items_due ON outbox_items (topic, status, next_attempt_at);

-- Notifications not yet delivered move over (a delivered one needs no
-- row: its response is on its configuration). The lane is the
-- configuration, the payload the exact body the signature is over.
INSERT INTO outbox_items (topic, item_key, lane, payload, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at)
SELECT 'notification', id, configuration_id, body,
       CASE status WHEN 'sending' THEN 'claimed' ELSE status END,
       attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at
FROM notification_deliveries WHERE status IN ('pending', 'sending', 'failed');
DROP TABLE notification_deliveries;

-- Fan-outs still to do (or failed), keyed by the applied run; the payload
-- is its workspace.
INSERT INTO outbox_items (topic, item_key, lane, payload, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at)
SELECT 'trigger-fan-out', run_id, '', workspace_id, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at
FROM trigger_fanouts WHERE status IN ('pending', 'claimed', 'failed');
DROP TABLE trigger_fanouts;

-- Run task requests still due (a pending result of a running stage),
-- keyed by the result. The result keeps only its own lifecycle.
INSERT INTO outbox_items (topic, item_key, lane, payload, status, attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at)
SELECT 'run-task', id, '', '',
       CASE WHEN claimed_by <> '' THEN 'claimed' ELSE 'pending' END,
       attempts, next_attempt_at, claimed_by, last_error, created_at, updated_at
FROM task_results WHERE status = 'pending' AND next_attempt_at > 0;
DROP INDEX task_results_due;
ALTER TABLE task_results DROP COLUMN attempts;
ALTER TABLE task_results DROP COLUMN next_attempt_at;
ALTER TABLE task_results DROP COLUMN claimed_by;
ALTER TABLE task_results DROP COLUMN last_error;
