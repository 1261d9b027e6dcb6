-- Whether user tokens may act in the organization (the user-tokens-enabled
-- setting), as a column because authentication checks it on every request.
ALTER TABLE organizations ADD COLUMN user_tokens_enabled BOOLEAN NOT NULL DEFAULT TRUE;
