-- Whether a value a stack publishes came from a sensitive deployment
-- output (internal/stack, publish): a stack that reads it through an
-- upstream_input must take it into a sensitive variable.
ALTER TABLE stack_published_outputs ADD COLUMN sensitive BOOLEAN NOT NULL DEFAULT FALSE;
