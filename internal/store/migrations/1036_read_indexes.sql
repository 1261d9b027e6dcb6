-- A workspace read names the workspace's current configuration version
-- and newest health assessment (each the first of an ORDER BY ... DESC,
-- id DESC): with the tie-break in the index, the store reads the one row
-- instead of sorting the workspace's whole history on every read.
CREATE INDEX configuration_versions_current ON configuration_versions (workspace_id, current_since, id);
DROP INDEX assessment_results_workspace;
CREATE INDEX assessment_results_workspace ON assessment_results (workspace_id, created_at, id);
