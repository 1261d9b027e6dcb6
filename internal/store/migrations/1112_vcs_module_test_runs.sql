-- The test runs a commit of a VCS-backed registry module made (a push to
-- its branch, or a pull request to it: internal/vcs), and the commit
-- their statuses go to; module_name and provider name the module when
-- the run was made (the statuses' context).
CREATE TABLE vcs_module_test_runs (
    test_run_id TEXT PRIMARY KEY REFERENCES module_test_runs (id) ON DELETE CASCADE,
    organization_name TEXT NOT NULL,
    module_name TEXT NOT NULL,
    provider TEXT NOT NULL,
    oauth_token_id TEXT NOT NULL,
    identifier TEXT NOT NULL,
    sha TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
