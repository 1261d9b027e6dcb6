-- A workspace's terraform version as a column beside its settings (attrs
-- keeps it too, as the API shows it): the admin terraform versions API
-- counts the workspaces that use a version (usage) and refuses to delete
-- one in use, in the store and under the version's row lock. A leading
-- "v" is dropped ("v1.5.7" uses 1.5.7); a constraint is kept as written.
ALTER TABLE workspaces ADD COLUMN terraform_version TEXT NOT NULL DEFAULT 'latest';
UPDATE workspaces SET terraform_version = ltrim(trim(COALESCE(json_extract(attrs, '$."terraform-version"'), 'latest')), 'v');
CREATE INDEX workspaces_terraform_version ON workspaces (terraform_version);
