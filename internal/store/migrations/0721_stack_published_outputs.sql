-- The values a stack publishes with publish_output blocks, for the
-- upstream_input blocks of other stacks of its organization. value and
-- type are Terraform JSON (the value, and its type in the type syntax); a
-- change makes a new configuration in each stack that reads the stack.
CREATE TABLE stack_published_outputs (
    stack_id TEXT NOT NULL REFERENCES stacks (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    type TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (stack_id, name)
);

-- The upstream_input blocks of each stack's latest completed
-- configuration: which stacks (organization, project name, stack name) it
-- reads, so a publishing stack finds its readers.
CREATE TABLE stack_upstreams (
    stack_id TEXT NOT NULL REFERENCES stacks (id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    organization TEXT NOT NULL,
    project TEXT NOT NULL,
    stack TEXT NOT NULL,
    PRIMARY KEY (stack_id, name)
);
CREATE INDEX stack_upstreams_source ON stack_upstreams (organization, project, stack);
