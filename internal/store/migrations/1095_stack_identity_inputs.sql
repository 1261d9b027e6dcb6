-- A stack deployment run's inputs that take an identity_token's JWT
-- (internal/stack: variable → token name and audiences, JSON): the tokens
-- are minted for each step's job and never stored. The index finds the
-- deployment run from the configuration version its steps' workspace runs
-- use.
ALTER TABLE stack_deployment_runs ADD COLUMN identity_inputs TEXT NOT NULL DEFAULT '{}';
CREATE INDEX stack_deployment_runs_configuration_version ON stack_deployment_runs (configuration_version_id);
