-- Terraform Enterprise's global-provider-sharing (the admin organizations
-- API): a site admin shares an organization's private providers with
-- every organization of the site. The model's OrgReadProviders then lets
-- the members and tokens of any organization install them through the
-- provider registry protocol (terraform init); nothing else is shared.
ALTER TABLE organizations ADD COLUMN global_provider_sharing BOOLEAN NOT NULL DEFAULT FALSE;
