-- Notification configurations and their delivery outbox (internal/notify,
-- docs/design/notifications.md). token is write-only at the API: it keys the
-- HMAC signature and is never returned nor logged.
CREATE TABLE notification_configurations (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    subscribable_type TEXT NOT NULL,
    subscribable_id TEXT NOT NULL,
    name TEXT NOT NULL,
    destination_type TEXT NOT NULL,
    url TEXT NOT NULL DEFAULT '',
    token TEXT NOT NULL DEFAULT '',
    enabled BOOLEAN NOT NULL,
    triggers TEXT NOT NULL,
    email_addresses TEXT NOT NULL,
    email_user_ids TEXT NOT NULL,
    delivery_responses TEXT NOT NULL,
    last_failure TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX notification_configurations_subscribable ON notification_configurations (subscribable_id, created_at);

-- The outbox: one row per notification to send to one configuration. body
-- is the exact request body (the signature is over it); status follows the
-- table in docs/design/notifications.md.
CREATE TABLE notification_deliveries (
    id TEXT PRIMARY KEY,
    configuration_id TEXT NOT NULL REFERENCES notification_configurations (id) ON DELETE CASCADE,
    trigger_name TEXT NOT NULL,
    body TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    claimed_by TEXT NOT NULL DEFAULT '',
    last_error TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (status, next_attempt_at);
CREATE INDEX notification_deliveries_configuration ON notification_deliveries (configuration_id, created_at);

-- Declared run triggers (internal/trigger): a successful apply in the
-- source workspace queues a run in the target workspace.
CREATE TABLE run_triggers (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    sourceable_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    created_at BIGINT NOT NULL,
    UNIQUE (workspace_id, sourceable_id)
);
CREATE INDEX run_triggers_sourceable ON run_triggers (sourceable_id);

-- Derived dependencies (internal/trigger/derived.go): consumer_id's runs
-- read producer_id's state with their run token. outputs maps each output
-- name of the producer, as the reading run saw it, to a SHA-256 of its
-- value (values themselves are never copied). run_id is the consumer's
-- last run that read it; cycle marks an edge that would close a cycle and
-- is never fired.
CREATE TABLE derived_edges (
    producer_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    consumer_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    organization_name TEXT NOT NULL,
    run_id TEXT NOT NULL,
    outputs TEXT NOT NULL,
    cycle BOOLEAN NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (producer_id, consumer_id)
);
CREATE INDEX derived_edges_consumer ON derived_edges (consumer_id);

-- The workspaces an origin apply has queued runs in (one run per
-- workspace per origin), and the origin of each triggered run.
CREATE TABLE trigger_origins (
    origin_run_id TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (origin_run_id, workspace_id)
);
CREATE TABLE triggered_runs (
    run_id TEXT PRIMARY KEY,
    origin_run_id TEXT NOT NULL,
    source_run_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- A workspace that switched derived triggers off (consumer side): its
-- derived edges are still recorded and listed, never fired.
CREATE TABLE dependency_settings (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    derived_triggers BOOLEAN NOT NULL
);
