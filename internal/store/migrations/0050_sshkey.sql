-- SSH keys: private keys an organization keeps for fetching Terraform
-- modules from private git repositories. value is write-only at the API:
-- it is never returned and never logged.
CREATE TABLE ssh_keys (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX ssh_keys_organization ON ssh_keys (organization_name, created_at);

-- The key a workspace uses, '' for none. The column belongs to the
-- workspace domain; deleting a key clears it (workspace.ClearSSHKey, run by
-- the SSH key service inside its delete transaction).
ALTER TABLE workspaces ADD COLUMN ssh_key_id TEXT NOT NULL DEFAULT '';
CREATE INDEX workspaces_ssh_key ON workspaces (ssh_key_id);
