-- The managed resource instances of a state version, in the state's
-- order, kept the first time the version's resources are listed
-- (GET workspaces/:id/resources): a page of them is then an index range
-- of this table instead of a parse of the whole state (issue 16: lists in
-- SQL). state_version_resource_lists says a version's instances are all
-- here, and how many; both go with the version.
CREATE TABLE state_version_resource_lists (
    state_version_id TEXT PRIMARY KEY REFERENCES state_versions (id) ON DELETE CASCADE,
    total INTEGER NOT NULL
);
CREATE TABLE state_version_resources (
    state_version_id TEXT NOT NULL REFERENCES state_version_resource_lists (state_version_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    id TEXT NOT NULL,
    address TEXT NOT NULL,
    name TEXT NOT NULL,
    module TEXT NOT NULL,
    provider TEXT NOT NULL,
    type TEXT NOT NULL,
    name_index TEXT,
    PRIMARY KEY (state_version_id, seq)
);
