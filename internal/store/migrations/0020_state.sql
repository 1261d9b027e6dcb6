-- State versions: the history of a workspace's Terraform state. The state
-- itself lives in the blob store under state_key; a row is "finalized" only
-- once its blob is stored. No foreign key to workspaces: that table may come
-- later in the migration order; the workspace domain deletes states through
-- state.Service.DeleteWorkspaceStates.
CREATE TABLE state_versions (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    status TEXT NOT NULL,
    serial BIGINT NOT NULL,
    lineage TEXT NOT NULL DEFAULT '',
    md5 TEXT NOT NULL DEFAULT '',
    forced BOOLEAN NOT NULL DEFAULT FALSE,
    run_id TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL DEFAULT '',
    json_outputs TEXT,
    state_key TEXT NOT NULL DEFAULT '',
    json_state_key TEXT NOT NULL DEFAULT '',
    size BIGINT NOT NULL DEFAULT 0,
    state_md5 TEXT NOT NULL DEFAULT '',
    state_serial BIGINT NOT NULL DEFAULT 0,
    state_lineage TEXT NOT NULL DEFAULT '',
    format_version INTEGER NOT NULL DEFAULT 0,
    terraform_version TEXT NOT NULL DEFAULT '',
    summary TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    finalized_at BIGINT
);
CREATE INDEX state_versions_workspace ON state_versions (workspace_id, created_at);

-- Outputs of finalized versions; value and detailed_type are JSON.
CREATE TABLE state_version_outputs (
    id TEXT PRIMARY KEY,
    state_version_id TEXT NOT NULL REFERENCES state_versions (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    sensitive BOOLEAN NOT NULL,
    type TEXT NOT NULL,
    detailed_type TEXT NOT NULL,
    value TEXT NOT NULL,
    UNIQUE (state_version_id, name)
);

-- One row per workspace that ever had state: the current (finalized)
-- version, and the row finalizations lock to serialise.
CREATE TABLE state_heads (
    workspace_id TEXT PRIMARY KEY,
    current_id TEXT NOT NULL DEFAULT ''
);

-- Blob keys that may hold unreferenced data: written before a blob upload
-- and removed in the transaction that makes the blob part of a version, so a
-- crash in between leaves a record for the garbage collector, never a leak.
CREATE TABLE state_blob_orphans (
    blob_key TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL
);
