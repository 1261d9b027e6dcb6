-- The terraform versions a site admin registered (Terraform Enterprise's
-- admin terraform versions API, internal/toolversion): a version, where a
-- runner downloads its zip for each platform and the zip's SHA-256 (archs,
-- a JSON array of {url, sha, os, arch}), and whether workspaces may choose
-- it (enabled). A version that is not registered still runs when a runner
-- has it installed.
CREATE TABLE terraform_versions (
    id TEXT PRIMARY KEY,
    version TEXT NOT NULL UNIQUE,
    official BOOLEAN NOT NULL DEFAULT FALSE,
    enabled BOOLEAN NOT NULL DEFAULT TRUE,
    beta BOOLEAN NOT NULL DEFAULT FALSE,
    deprecated BOOLEAN NOT NULL DEFAULT FALSE,
    deprecated_reason TEXT,
    archs TEXT NOT NULL DEFAULT '[]',
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX terraform_versions_list ON terraform_versions (created_at, id);
