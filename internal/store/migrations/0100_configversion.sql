-- Configuration versions: the uploaded Terraform configurations that runs
-- plan and apply. workspace_id has no foreign key (the workspace domain
-- deletes a workspace's versions through DeleteWorkspaceConfigurationVersions).
-- blob_key names the archive in the blob store; it is set in the same
-- statement that makes the version "uploaded", after the blob is written.
-- current_since orders the versions that may become the workspace's
-- current one (NULL for speculative and not yet promoted provisional ones).
CREATE TABLE configuration_versions (
    id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    status TEXT NOT NULL,
    source TEXT NOT NULL,
    auto_queue_runs BOOLEAN NOT NULL DEFAULT TRUE,
    speculative BOOLEAN NOT NULL DEFAULT FALSE,
    provisional BOOLEAN NOT NULL DEFAULT FALSE,
    current_since BIGINT,
    error TEXT NOT NULL DEFAULT '',
    error_message TEXT NOT NULL DEFAULT '',
    blob_key TEXT NOT NULL DEFAULT '',
    sha256 TEXT NOT NULL DEFAULT '',
    size BIGINT NOT NULL DEFAULT 0,
    status_timestamps TEXT NOT NULL DEFAULT '{}',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX configuration_versions_workspace ON configuration_versions (workspace_id, created_at);

-- Blobs to delete once not_before has passed: archives of deleted or
-- archived versions (not_before = now) and uploads in progress (not_before
-- in the future, removed when the upload commits), so that a crash at any
-- point leaves at worst a blob that a later sweep removes.
CREATE TABLE configuration_version_garbage (
    blob_key TEXT PRIMARY KEY,
    not_before BIGINT NOT NULL
);
