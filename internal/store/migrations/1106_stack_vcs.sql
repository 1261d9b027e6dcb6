-- VCS-backed stacks (internal/stack, internal/vcs): a stack's vcs-repo as
-- the stack shows it (JSON, '' for none), and its connection as the VCS
-- domain keeps it (the same columns as a workspace's, vcs_connections).
ALTER TABLE stacks ADD COLUMN vcs_repo TEXT NOT NULL DEFAULT '';

CREATE TABLE vcs_stack_connections (
    stack_id TEXT PRIMARY KEY REFERENCES stacks (id) ON DELETE CASCADE,
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
CREATE INDEX vcs_stack_connections_token ON vcs_stack_connections (oauth_token_id);
