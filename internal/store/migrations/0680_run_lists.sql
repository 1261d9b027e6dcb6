-- Run lists page in SQL (internal/run, docs/design/runs.md "Lists"): an
-- index that answers "a workspace's (or an organization's) runs, newest
-- first" in order without sorting, and the number of each workspace's
-- runs (assessments left out) kept as the runs are created, so that the
-- total of an unfiltered page does not count the whole history.
CREATE INDEX runs_workspace_list ON runs (workspace_id, assessment, created_at, id);
CREATE INDEX runs_org_list ON runs (organization_name, assessment, created_at, id);
CREATE TABLE run_counts (
    workspace_id TEXT PRIMARY KEY,
    runs BIGINT NOT NULL
);
INSERT INTO run_counts (workspace_id, runs) SELECT workspace_id, COUNT(*) FROM runs WHERE NOT assessment GROUP BY workspace_id;
