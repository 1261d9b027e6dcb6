-- Deployment history (issue 18): who made a deployment, the graph as the
-- CLI draws it (nodes and edges), the generated Terraform files (JSON
-- object path → content), the deployment a rollback returned to, and the
-- sha256 of the caller's idempotency key (unique per environment).
ALTER TABLE orchestrator_deployments ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE orchestrator_deployments ADD COLUMN graph_view TEXT NOT NULL DEFAULT '{}';
ALTER TABLE orchestrator_deployments ADD COLUMN terraform TEXT NOT NULL DEFAULT '{}';
ALTER TABLE orchestrator_deployments ADD COLUMN rollback_of TEXT NOT NULL DEFAULT '';
ALTER TABLE orchestrator_deployments ADD COLUMN idempotency_key TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX orchestrator_deployments_idempotency ON orchestrator_deployments (organization_name, project_id, env_id, idempotency_key) WHERE idempotency_key <> '';
