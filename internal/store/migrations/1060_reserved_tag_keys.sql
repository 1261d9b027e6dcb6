-- Reserved tag keys: tag binding keys an organization reserves, offered to
-- those who tag projects and workspaces. With disable_overrides a
-- workspace cannot override its project's binding of the key: writes that
-- would are refused, and the project's value is the effective one. Keys
-- are unique in their organization (compared exactly, as binding keys
-- are). The table belongs to the workspace domain, beside the tags.
CREATE TABLE reserved_tag_keys (
    id TEXT PRIMARY KEY,
    organization_name TEXT NOT NULL REFERENCES organizations (name) ON UPDATE CASCADE ON DELETE CASCADE,
    tag_key TEXT NOT NULL,
    disable_overrides BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    UNIQUE (organization_name, tag_key)
);
