-- Blobs of runs and stack configurations to delete once not_before has
-- passed, as configuration_version_garbage and registry_module_garbage
-- are for theirs: recorded in the transaction that deletes the rows that
-- named them (a workspace's runs, a stack, an organization with all it
-- holds), so that a rolled-back deletion loses nothing and a committed one
-- leaves nothing behind. Until this table, a deleted workspace's run logs
-- and plans, and everything of a deleted organization, stayed in the blob
-- store for good. A stack configuration's upload is recorded before its
-- archive is written (not_before in the future, removed when the upload
-- commits), so that a crash leaves at worst a blob a later sweep removes.
CREATE TABLE run_garbage (
    blob_key TEXT PRIMARY KEY,
    not_before BIGINT NOT NULL
);

CREATE TABLE stack_configuration_garbage (
    blob_key TEXT PRIMARY KEY,
    not_before BIGINT NOT NULL
);
