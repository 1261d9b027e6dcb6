-- A run that stores a new state discards the saved plans of its workspace
-- (internal/run discardSavedPlans, on every apply): this index holds only
-- saved plans, so that look-up reads them, not the workspace's history.
CREATE INDEX runs_saved_plans ON runs (workspace_id) WHERE status = 'planned_and_saved';
