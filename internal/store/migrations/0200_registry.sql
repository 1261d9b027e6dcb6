-- Private module registry. A module is (organization, registry_name,
-- namespace, name, provider); private modules have namespace =
-- organization, public ones reference a module of the public registry by
-- its namespace and have no versions here. A version's archive is in the
-- blob store under blob_key, set in the statement that makes the version
-- "ok" (after the blob is complete and inspected); inspection holds what
-- terraform-config-inspect found (variables, outputs, providers) as JSON.
CREATE TABLE registry_modules (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    registry_name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    no_code BOOLEAN NOT NULL DEFAULT FALSE,
    tag_bindings TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, registry_name, namespace, name, provider)
);

CREATE TABLE registry_module_versions (
    id TEXT PRIMARY KEY,
    module_id TEXT NOT NULL REFERENCES registry_modules (id) ON DELETE CASCADE,
    version TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT NOT NULL DEFAULT '',
    blob_key TEXT NOT NULL DEFAULT '',
    sha256 TEXT NOT NULL DEFAULT '',
    size BIGINT NOT NULL DEFAULT 0,
    inspection TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (module_id, version)
);

-- Archives to delete once not_before has passed: those of deleted versions
-- (not_before = now) and uploads in progress (not_before in the future,
-- removed when the upload commits), so that a crash leaves at worst a blob
-- that a later sweep removes.
CREATE TABLE registry_module_garbage (
    blob_key TEXT PRIMARY KEY,
    not_before BIGINT NOT NULL
);
