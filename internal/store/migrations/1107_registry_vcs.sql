-- VCS-backed registry modules (internal/registry, internal/vcs): a
-- module's vcs-repo as the registry shows it (JSON, '' for none) and what
-- its first fetch found ('' until then, no_version_tags, setup_failed
-- with vcs_error); a version's source (tfe-api for an upload, else the
-- VCS provider) and the commit it was published from.
ALTER TABLE registry_modules ADD COLUMN vcs_repo TEXT NOT NULL DEFAULT '';
ALTER TABLE registry_modules ADD COLUMN vcs_status TEXT NOT NULL DEFAULT '';
ALTER TABLE registry_modules ADD COLUMN vcs_error TEXT NOT NULL DEFAULT '';
ALTER TABLE registry_module_versions ADD COLUMN source TEXT NOT NULL DEFAULT 'tfe-api';
ALTER TABLE registry_module_versions ADD COLUMN commit_sha TEXT NOT NULL DEFAULT '';

-- A module's connection as the VCS domain keeps it (the columns of
-- vcs_connections): branch is '' for a module publishing from tags, whose
-- tags_regex then matches its version tags.
CREATE TABLE vcs_module_connections (
    module_id TEXT PRIMARY KEY REFERENCES registry_modules (id) ON DELETE CASCADE,
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
CREATE INDEX vcs_module_connections_token ON vcs_module_connections (oauth_token_id);
