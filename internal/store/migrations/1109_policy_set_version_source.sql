-- A version's source (tfe-api for an upload, else the VCS provider) and,
-- from a commit, its ingress attributes (JSON: commit-sha, commit-url,
-- identifier; '' for none).
ALTER TABLE policy_set_versions ADD COLUMN source TEXT NOT NULL DEFAULT 'tfe-api';
ALTER TABLE policy_set_versions ADD COLUMN ingress TEXT NOT NULL DEFAULT '';
