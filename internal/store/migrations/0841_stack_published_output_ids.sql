-- stack_published_outputs.value is sealed at rest (internal/seal): a
-- published output may carry a sensitive component output. Sealing and
-- re-sealing walk a table by one text key, so each row gets one: the
-- stack ID and the output name.
ALTER TABLE stack_published_outputs ADD COLUMN id TEXT NOT NULL DEFAULT '';
UPDATE stack_published_outputs SET id = stack_id || '/' || name;
CREATE UNIQUE INDEX stack_published_outputs_id ON stack_published_outputs (id);
