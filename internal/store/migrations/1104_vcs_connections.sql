-- A workspace's connection to a repository (internal/vcs): what the VCS
-- domain keeps beside the workspace's vcs-repo setting (workspaces.attrs):
-- branch is the branch that runs (the repository's default branch when
-- the workspace names none), secret the webhook's HMAC key (sealed, never
-- returned), provider_hook_id the hook's ID at the host once registered
-- ('' until then). webhook_id ends the webhook's URL
-- (/webhooks/vcs/<webhook_id>).
CREATE TABLE vcs_connections (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces (id) ON DELETE CASCADE,
    webhook_id TEXT NOT NULL UNIQUE,
    oauth_token_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    branch TEXT NOT NULL,
    tags_regex TEXT NOT NULL DEFAULT '',
    ingress_submodules BOOLEAN NOT NULL DEFAULT FALSE,
    secret TEXT NOT NULL,
    provider_hook_id TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL
);
CREATE INDEX vcs_connections_token ON vcs_connections (oauth_token_id);

-- The runs a push (or a connection) started, and the commit each reports
-- its status to.
CREATE TABLE vcs_runs (
    run_id TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
    oauth_token_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    sha TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX vcs_runs_workspace ON vcs_runs (workspace_id);
