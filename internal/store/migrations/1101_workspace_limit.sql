-- Terraform Enterprise's workspace-limit (the admin organizations API):
-- the most workspaces an organization may have, set by a site admin; -1
-- for none. A workspace is not created past it (internal/workspace,
-- Create); existing workspaces stay when it is lowered.
ALTER TABLE organizations ADD COLUMN workspace_limit BIGINT NOT NULL DEFAULT -1;
