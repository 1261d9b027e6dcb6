-- What a site admin sets of an organization's runs (the admin
-- organizations API, internal/organization):
-- plan_timeout and apply_timeout are the organization's own time limits
-- of a plan and an apply (Go durations, "24h"), '' for the site's
-- (internal/sitesettings); a runner stops a phase that runs past its
-- limit (internal/runner).
-- access_beta_tools lets the organization's workspaces use terraform
-- versions a site admin registered as beta (internal/toolversion).
-- worker_sudo lets its runs gain privileges (sudo, setuid programs); a
-- runner starts terraform with no_new_privs otherwise.
ALTER TABLE organizations ADD COLUMN plan_timeout TEXT NOT NULL DEFAULT '';
ALTER TABLE organizations ADD COLUMN apply_timeout TEXT NOT NULL DEFAULT '';
ALTER TABLE organizations ADD COLUMN access_beta_tools BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE organizations ADD COLUMN worker_sudo BOOLEAN NOT NULL DEFAULT FALSE;
