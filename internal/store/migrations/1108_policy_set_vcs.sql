-- VCS-backed policy sets (internal/policy, internal/vcs): a set's vcs-repo
-- as the set shows it (JSON, '' for none), and its connection as the VCS
-- domain keeps it (the columns of vcs_connections).
ALTER TABLE policy_sets ADD COLUMN vcs_repo TEXT NOT NULL DEFAULT '';

CREATE TABLE vcs_policy_set_connections (
    policy_set_id TEXT PRIMARY KEY REFERENCES policy_sets (id) ON DELETE CASCADE,
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
CREATE INDEX vcs_policy_set_connections_token ON vcs_policy_set_connections (oauth_token_id);
