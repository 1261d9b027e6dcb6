-- The ingress attributes of a configuration version made from a commit
-- (internal/vcs): the commit, branch, tag or pull request and who pushed
-- it, as JSON (configversion.Ingress); '' for a version uploaded through
-- the API.
ALTER TABLE configuration_versions ADD COLUMN ingress TEXT NOT NULL DEFAULT '';
