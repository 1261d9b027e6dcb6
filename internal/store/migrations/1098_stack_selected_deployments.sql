-- The deployments a stack configuration runs (a JSON array of names; []
-- for all), its create request's selected-deployments (internal/stack,
-- createRuns).
ALTER TABLE stack_configurations ADD COLUMN selected_deployments TEXT NOT NULL DEFAULT '[]';
