-- The token that created a configuration version: the run that an upload
-- queues (auto-queue-runs) is checked and attributed as that caller, since
-- the upload itself comes through a capability URL with no token.
ALTER TABLE configuration_versions ADD COLUMN created_by_token TEXT NOT NULL DEFAULT '';
