-- The run of an abandoned step whose saved plan (or unfinished plan) must
-- still be discarded on the deployment's workspace. Set in the transaction
-- that abandons the step, cleared once the run service has discarded or
-- cancelled that run; the stack service retries until it has.
ALTER TABLE stack_deployment_steps ADD COLUMN release_run TEXT NOT NULL DEFAULT '';
