-- A module version's README (the root module's README.md, at most 64 KiB),
-- kept beside its inspection rather than in it: the versions list that
-- terraform init and the registry pages read holds every version's
-- inspection, and only one version's README is ever shown. Versions
-- uploaded before this have none until uploaded again.
ALTER TABLE registry_module_versions ADD COLUMN readme TEXT NOT NULL DEFAULT '';
