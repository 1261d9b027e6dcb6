-- The stack configurations a commit made (internal/vcs), and the commit
-- their deployment runs report their statuses to; name is the stack's
-- name when the configuration was made (the statuses' context).
CREATE TABLE vcs_stack_configurations (
    configuration_id TEXT PRIMARY KEY REFERENCES stack_configurations (id) ON DELETE CASCADE,
    stack_id TEXT NOT NULL,
    organization_name TEXT NOT NULL,
    stack_name TEXT NOT NULL,
    oauth_token_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    sha TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
