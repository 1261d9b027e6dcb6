-- A run's variables (RunCreateOptions.Variables, a stack deployment's
-- inputs) move out of runs.doc into their own column, sealed at rest
-- (internal/seal) like every other secret. NULL: the run has none, or it
-- was stored before and run.SealVariables moves them at the next start.
ALTER TABLE runs ADD COLUMN variables TEXT;
