-- Private provider registry (internal/providerregistry). A provider is
-- (organization, registry_name, namespace, name): private ones have
-- namespace = organization and versions here; public ones only reference
-- a provider of the public registry and have none, as in HCP Terraform.
CREATE TABLE registry_providers (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    registry_name TEXT NOT NULL,
    namespace TEXT NOT NULL,
    name TEXT NOT NULL,
    tag_bindings TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, registry_name, namespace, name)
);

-- A version names the GPG key (key_id, 16 hex digits) that signs its
-- SHA256SUMS. The SHA256SUMS file (text) and its detached signature
-- (base64 of the binary signature) are small and kept here, checked when
-- uploaded; '' until then.
CREATE TABLE registry_provider_versions (
    id TEXT PRIMARY KEY,
    provider_id TEXT NOT NULL REFERENCES registry_providers (id) ON DELETE CASCADE,
    version TEXT NOT NULL,
    key_id TEXT NOT NULL,
    protocols TEXT NOT NULL DEFAULT '[]',
    shasums TEXT NOT NULL DEFAULT '',
    shasums_sig TEXT NOT NULL DEFAULT '',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (provider_id, version)
);

-- A platform's zip is in the blob store under blob_key, set in the
-- statement that records a complete upload whose SHA-256 is shasum.
CREATE TABLE registry_provider_platforms (
    id TEXT PRIMARY KEY,
    version_id TEXT NOT NULL REFERENCES registry_provider_versions (id) ON DELETE CASCADE,
    os TEXT NOT NULL,
    arch TEXT NOT NULL,
    filename TEXT NOT NULL,
    shasum TEXT NOT NULL,
    blob_key TEXT NOT NULL DEFAULT '',
    size BIGINT NOT NULL DEFAULT 0,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (version_id, os, arch)
);

-- GPG public keys of a namespace (an organization) of the private
-- registry, by their key ID.
CREATE TABLE registry_gpg_keys (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    key_id TEXT NOT NULL,
    ascii_armor TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, key_id)
);

-- Provider zips to delete once not_before has passed, as
-- registry_module_garbage is for module archives.
CREATE TABLE registry_provider_garbage (
    blob_key TEXT PRIMARY KEY,
    not_before BIGINT NOT NULL
);
